import { HttpError, requireAdmin, validate } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import type { PrismaClient } from '../db.js';

const skuParam = z.object({ sku: z.string().min(1).max(64) });

export function stockRoutes(
  app: Express,
  { db, adminToken, now }: { db: PrismaClient; adminToken?: string; now: () => Date },
) {
  app.get('/stock/:sku', async (req, res) => {
    const { sku } = validate(skuParam, req.params, 'path');
    const item = await db.stockItem.findUnique({ where: { sku } });
    if (!item) throw new HttpError('not_found', `no stock item ${sku}`);
    res.json({ sku: item.sku, available: item.available, reserved: item.reserved });
  });

  // Setting stock is an operator action, outside the business flow.
  app.put('/stock/:sku', requireAdmin(adminToken), async (req, res) => {
    const { sku } = validate(skuParam, req.params, 'path');
    const { available } = validate(z.object({ available: z.number().int().min(0).max(1_000_000_000) }), req.body);
    const item = await db.stockItem.upsert({
      where: { sku },
      create: { sku, available, updatedAt: now() },
      update: { available, updatedAt: now() },
    });
    res.json({ sku: item.sku, available: item.available, reserved: item.reserved });
  });
}
