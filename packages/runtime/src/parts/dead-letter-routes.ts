import type { SqlClient } from '@idem/database';
import { answer, auditResult, HttpError, requireOperator, route } from '@idem/http';
import type { DeadLetterCursor, Inbox } from '@idem/inbox';
import { ReplayTruncatedError, ReplayWindowError, type Idem } from '@idem/service';
import { z } from 'zod';
import type { Express, RequestHandler } from 'express';
import type { ServicePart } from '../context.js';

type DeadLetterStore = Pick<Inbox<SqlClient>, 'deadLetters'>['deadLetters'];

/**
 * The operator's routes for the inbox's dead letters (role `http`): list them a page at a
 * time, read one payload, replay them to their consumer.
 */
export function deadLetters(): ServicePart {
  return {
    name: 'dead letters',
    start: ({ roles, idem, operators }) => ({
      routes(app) {
        if (!roles.has('http')) return;
        const admin = requireOperator(operators);
        listRoute(app, idem.inbox.deadLetters, admin);
        payloadRoute(app, idem.inbox.deadLetters, admin);
        replayRoute(app, idem.inbox.deadLetters, admin, idem.deadLetters.replay);
      },
    }),
  };
}

function listRoute(app: Express, deadLetters: DeadLetterStore, admin: RequestHandler) {
  // Pages without payloads (a dead letter may hold up to 64 KiB); one payload at a time below.
  route(
    app,
    {
      method: 'get',
      path: '/dead-letters',
      summary: 'Dead letters waiting for replay, a page at a time, without their payloads',
      audience: 'operator',
      use: [admin],
      query: z.object({
        consumer: z.string().max(200).optional(),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        after: z.string().max(1000).optional(),
      }),
      responses: {
        200: answer(
          '`deadLetters` and the cursor of the `next` page (null on the last)',
          z.object({
            deadLetters: z.array(
              z.object({
                consumer: z.string(),
                messageId: z.string(),
                brokerId: z.string().nullable(),
                payloadBytes: z.number().int(),
                truncated: z.boolean(),
                code: z.string(),
                reason: z.string(),
                attempts: z.number().int(),
                deadLetteredAt: z.iso.datetime(),
                replayedAt: z.iso.datetime().nullable(),
                replayCount: z.number().int(),
              }),
            ),
            next: z.string().nullable(),
          }),
        ),
      },
    },
    async ({ query: { consumer, limit, after } }, _req, res) => {
      const page = await deadLetters.list({
        consumer,
        limit,
        payloads: false,
        ...(after ? { after: decodeCursor(after) } : {}),
      });
      const last = page.at(-1);
      res.json({
        deadLetters: page.map(({ payload: _payload, ...deadLetter }) => deadLetter),
        next: page.length === limit && last ? encodeCursor(last) : null,
      });
    },
  );
}

function payloadRoute(app: Express, deadLetters: DeadLetterStore, admin: RequestHandler) {
  route(
    app,
    {
      method: 'get',
      path: '/dead-letters/payload',
      summary: "One dead letter's payload, exactly as delivered",
      audience: 'operator',
      use: [admin],
      query: z.object({ consumer: z.string().max(200), messageId: z.string().max(200) }),
      responses: {
        200: answer(
          'The payload exactly as delivered; for one kept `truncated`, the start of its JSON text',
          z.object({
            consumer: z.string(),
            messageId: z.string(),
            payload: z.unknown(),
            truncated: z.object({ bytes: z.number().int() }).optional(),
          }),
        ),
        404: 'No such dead letter waiting for replay',
      },
    },
    async ({ query: { consumer, messageId } }, _req, res) => {
      const [deadLetter] = await deadLetters.list({ consumer, messageIds: [messageId], limit: 1 });
      if (!deadLetter) throw new HttpError('not_found', 'no such dead letter waiting for replay');
      res.json({
        consumer,
        messageId,
        payload: deadLetter.payload,
        ...(deadLetter.truncated ? { truncated: { bytes: deadLetter.payloadBytes } } : {}),
      });
    },
  );
}

function replayRoute(
  app: Express,
  deadLetters: DeadLetterStore,
  admin: RequestHandler,
  replay: Idem<SqlClient>['deadLetters']['replay'],
) {
  route(
    app,
    {
      method: 'post',
      path: '/dead-letters/replay',
      summary:
        'Publish dead letters again to their consumer, `limit` a call (100 unless told, at most 1,000), oldest first: `more` says whether matching ones remain (older than the replay window only with a reason)',
      audience: 'operator',
      use: [admin],
      body: z.object({
        consumer: z.string().max(200).optional(),
        messageIds: z.array(z.string().max(200)).max(1000).optional(),
        limit: z.number().int().min(1).max(1000).default(100),
        // Past the replay window a processed record may be gone: replaying then needs a reason.
        force: z.object({ reason: z.string().min(10).max(500) }).optional(),
      }),
      responses: {
        200: answer(
          'The `replayed` dead letters, and whether `more` match (call again for the next page)',
          z.object({
            replayed: z.array(z.object({ consumer: z.string(), messageId: z.string() })),
            more: z.boolean(),
          }),
        ),
        409: 'Some are older than the replay window, or kept truncated (replay those only with `force`)',
      },
    },
    async ({ body: { force, ...filter } }, _req, res) => {
      try {
        const replayed = await replay(filter, force);
        const { limit: _limit, ...matching } = filter;
        const more = (await deadLetters.list({ ...matching, limit: 1, payloads: false })).length > 0;
        const ids = replayed.map((d) => ({ consumer: d.consumer, messageId: d.messageId }));
        res.json(auditResult(res, { replayed: ids, more }));
      } catch (error) {
        const refused =
          error instanceof ReplayWindowError
            ? error.tooOld.map((d) => ({ ...d, why: 'older than the replay window' }))
            : error instanceof ReplayTruncatedError
              ? error.truncated.map((d) => ({ ...d, why: 'kept truncated: not the message that was delivered' }))
              : undefined;
        if (!refused) throw error;
        auditResult(res, {
          refused: refused.map(({ consumer, messageId, why }) => ({ consumer, messageId, why })),
        });
        throw new HttpError('conflict', (error as Error).message, {
          errors: refused.map((d) => ({ field: `${d.consumer}/${d.messageId}`, message: d.why })),
        });
      }
    },
  );
}

const encodeCursor = ({ deadLetteredAt, consumer, messageId }: DeadLetterCursor) =>
  Buffer.from(JSON.stringify([deadLetteredAt.toISOString(), consumer, messageId])).toString('base64url');

function decodeCursor(cursor: string): DeadLetterCursor {
  try {
    const [at, consumer, messageId] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as string[];
    const deadLetteredAt = new Date(at ?? '');
    if (Number.isNaN(deadLetteredAt.getTime()) || typeof consumer !== 'string' || typeof messageId !== 'string')
      throw new Error('cursor');
    return { deadLetteredAt, consumer, messageId };
  } catch {
    throw new HttpError('invalid_request', 'after: not a cursor this endpoint gave', {
      errors: [{ field: 'query.after', message: 'not a cursor this endpoint gave' }],
    });
  }
}
