import type { z } from 'zod';
import { HttpError } from './errors.js';

/** Parses request input with a zod schema, or throws a 400 naming every offending field. */
export function validate<S extends z.ZodType>(schema: S, input: unknown, what = 'body'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const errors = result.error.issues.map((issue) => ({
    field: [what, ...issue.path].reduce<string>(
      (path, key) => (typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${String(key)}` : String(key)),
      '',
    ),
    message: issue.message,
  }));
  throw new HttpError('invalid_request', errors.map((e) => `${e.field}: ${e.message}`).join('; '), { errors });
}
