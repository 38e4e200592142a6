import { answer, HttpError, requireOperator, route, type Operator } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import { findStock, setAvailable } from '../application/stock.js';
import type { PrismaClient } from '../db.js';

const skuParam = z.object({ sku: z.string().min(1).max(64) });
const stockItem = z.object({ sku: z.string(), available: z.number().int(), reserved: z.number().int() });

export function stockRoutes(
  app: Express,
  { db, operators, now }: { db: PrismaClient; operators: readonly Operator[]; now: () => Date },
) {
  route(
    app,
    {
      method: 'get',
      path: '/stock/:sku',
      summary: 'Stock of one SKU: available, and reserved for orders not paid yet',
      params: skuParam,
      responses: { 200: answer('The stock item', stockItem), 404: 'No such SKU' },
    },
    async ({ params: { sku } }, _req, res) => {
      const item = await findStock(db, sku);
      if (!item) throw new HttpError('not_found', `no stock item ${sku}`);
      res.json({ sku: item.sku, available: item.available, reserved: item.reserved });
    },
  );

  // Setting stock is an operator action, outside the business flow.
  route(
    app,
    {
      method: 'put',
      path: '/stock/:sku',
      summary: 'Set the available units of a SKU (creating it)',
      audience: 'operator',
      use: [requireOperator(operators)],
      params: skuParam,
      body: z.object({ available: z.number().int().min(0).max(1_000_000_000) }),
      responses: { 200: answer('The stock item', stockItem) },
    },
    async ({ params: { sku }, body: { available } }, _req, res) => {
      const item = await setAvailable(db, sku, available, now());
      res.json({ sku: item.sku, available: item.available, reserved: item.reserved });
    },
  );
}
