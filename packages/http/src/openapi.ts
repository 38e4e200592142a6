import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { auditing } from './audit.js';
import { STATUS_OF } from './errors.js';
import { validate } from './validate.js';

/** Who may call an operation (docs/operations.md "Who may call what"); unset: anyone. */
export type Audience = 'customer' | 'operator' | 'customer-or-operator';

/**
 * One HTTP operation: the zod schemas that validate its input are also what the OpenAPI
 * document says of it, so the two cannot disagree.
 */
export interface Operation<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  readonly method: 'get' | 'post' | 'put';
  /** Express style: `/orders/:id`. */
  readonly path: string;
  readonly summary: string;
  readonly audience?: Audience;
  readonly params?: P;
  readonly query?: Q;
  readonly body?: B;
  /** Request headers it reads, by name. */
  readonly headers?: Record<string, { readonly description: string; readonly schema: z.ZodType }>;
  /**
   * Its answers besides the problem details every operation may give: status → description, or
   * {@link answer} for one with a JSON body (every 2xx JSON answer has one).
   */
  readonly responses: Record<number, string | Answer>;
  /** Middleware before it: authentication, rate limits. */
  readonly use?: readonly RequestHandler[];
}

/** An answer with a JSON body: what the OpenAPI document says of it, and what it is checked against. */
export interface Answer {
  readonly description: string;
  readonly body: z.ZodType;
}

/** An answer whose body `body` describes. */
export const answer = (description: string, body: z.ZodType): Answer => ({ description, body });

/**
 * Under the tests (vitest sets VITEST) every JSON answer is checked against its documented body
 * before it leaves, so the OpenAPI document cannot drift from what the code answers. Production
 * pays nothing for it.
 */
const CHECK_ANSWERS = process.env.VITEST === 'true' || process.env.IDEM_CHECK_ANSWERS === '1';

function checkedAnswers(operation: AnyOperation, res: Response): void {
  const json = res.json.bind(res);
  res.json = (body: unknown) => {
    const documented = operation.responses[res.statusCode];
    if (typeof documented === 'object') {
      // What the client receives: the body as JSON text, read back (a Date is a string by then).
      const checked = documented.body.safeParse(JSON.parse(JSON.stringify(body ?? null)));
      if (!checked.success)
        throw new Error(
          `${operation.method.toUpperCase()} ${operation.path} answered ${res.statusCode} with a body its OpenAPI document does not describe: ${z.prettifyError(checked.error)}`,
        );
    }
    return json(body);
  };
}

export interface Input<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  readonly params: z.infer<P>;
  readonly query: z.infer<Q>;
  readonly body: z.infer<B>;
}

type AnyOperation = Operation<z.ZodType, z.ZodType, z.ZodType>;
const OPERATIONS = Symbol('operations');
const operationsOf = (app: Express): AnyOperation[] =>
  ((app.locals as { [OPERATIONS]?: AnyOperation[] })[OPERATIONS] ??= []);

type None = z.ZodObject<Record<string, never>>;

/**
 * Registers an operation on `app`: validates its path parameters, query and body with its
 * schemas (400 naming each field), hands them to `handler`, and records it for the app's
 * OpenAPI document. An operation the operator may call leaves one audit event per call
 * (audit.ts), refused calls of an operator-only one included.
 */
export function route<P extends z.ZodType = None, Q extends z.ZodType = None, B extends z.ZodType = None>(
  app: Express,
  operation: Operation<P, Q, B>,
  handler: (input: Input<P, Q, B>, req: Request, res: Response) => unknown,
): void {
  operationsOf(app).push(operation as unknown as AnyOperation);
  const { audience } = operation;
  const audit =
    audience === 'operator' || audience === 'customer-or-operator'
      ? [auditing(app, `${operation.method.toUpperCase()} ${operation.path}`, audience === 'operator')]
      : [];
  app[operation.method](operation.path, ...audit, ...(operation.use ?? []), async (req: Request, res: Response) => {
    if (CHECK_ANSWERS) checkedAnswers(operation as unknown as AnyOperation, res);
    const input = {
      params: operation.params ? validate(operation.params, req.params, 'path') : {},
      query: operation.query ? validate(operation.query, req.query, 'query') : {},
      body: operation.body ? validate(operation.body, req.body ?? {}) : {},
    } as Input<P, Q, B>;
    await handler(input, req, res);
  });
}

/** The OpenAPI 3.1 document of every operation registered on `app` with {@link route}. */
export function openApiDocument(app: Express, info: { title: string; version: string; description?: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of operationsOf(app)) {
    const path = operation.path.replace(/:(\w+)/g, '{$1}');
    (paths[path] ??= {})[operation.method] = operationObject(operation);
  }
  return {
    openapi: '3.1.0',
    info,
    paths,
    components: {
      securitySchemes: {
        customer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            "A customer's token: `sub` is the customer id, its verified `email` claim where the customer's receipts go",
        },
        operator: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN)' },
      },
      schemas: { Problem: PROBLEM_SCHEMA },
    },
  };
}

/** Serves the app's OpenAPI document at `GET /openapi.json`. */
export function serveOpenApi(app: Express, info: Parameters<typeof openApiDocument>[1]): void {
  app.get('/openapi.json', (_req, res) => void res.json(openApiDocument(app, info)));
}

/** RFC 9457 problem details, as every error is answered (problem.ts). */
const PROBLEM_SCHEMA = {
  type: 'object',
  required: ['type', 'title', 'status', 'code', 'detail'],
  properties: {
    type: {
      type: 'string',
      format: 'uri-reference',
      description: 'Relative to the service: GET it for what the problem means',
    },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string', enum: Object.keys(STATUS_OF) },
    detail: { type: 'string' },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['field', 'message'],
        properties: { field: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
};

function operationObject(operation: AnyOperation) {
  const parameters = [
    ...parametersOf(operation.params, 'path'),
    ...parametersOf(operation.query, 'query'),
    ...Object.entries(operation.headers ?? {}).map(([name, { description, schema }]) => ({
      name,
      in: 'header',
      description,
      required: !schema.safeParse(undefined).success,
      schema: jsonSchema(schema),
    })),
  ];
  const problem = (description: string) => ({
    description,
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  });
  const guarded = operation.audience !== undefined;
  return {
    summary: operation.summary,
    ...(guarded ? { security: SECURITY[operation.audience!] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(operation.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(operation.body) } } } }
      : {}),
    responses: {
      ...Object.fromEntries(
        Object.entries(operation.responses).map(([status, documented]) => [
          status,
          typeof documented === 'string'
            ? { description: documented }
            : {
                description: documented.description,
                content: { 'application/json': { schema: jsonSchema(documented.body, 'output') } },
              },
        ]),
      ),
      ...(parameters.length > 0 || operation.body ? { 400: problem('Invalid input: `errors` names each field') } : {}),
      ...(guarded ? { 401: problem('No valid token'), 403: problem('Not allowed for this caller') } : {}),
      default: problem('Problem details (RFC 9457)'),
    },
  };
}

const SECURITY: Record<Audience, object[]> = {
  customer: [{ customer: [] }],
  operator: [{ operator: [] }],
  'customer-or-operator': [{ customer: [] }, { operator: [] }],
};

function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query') {
  if (!schema) return [];
  const { properties = {}, required = [] } = jsonSchema(schema) as {
    properties?: Record<string, object>;
    required?: string[];
  };
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || required.includes(name),
    schema: property,
  }));
}

/** The JSON Schema (draft 2020-12, OpenAPI 3.1's) of what a schema accepts (`input`) or describes (`output`). */
const jsonSchema = (schema: z.ZodType, io: 'input' | 'output' = 'input') => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
};
