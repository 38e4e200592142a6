import type { z } from 'zod';
import { HttpError, type FieldError } from './errors.js';

/**
 * Parses request input with a zod schema, or throws a 400 naming every offending field. Text
 * that PostgreSQL cannot store (a NUL character, a lone UTF-16 surrogate) is refused here first,
 * for every route and field at once: otherwise it passes the schema and fails at the database
 * as a 500.
 */
export function validate<S extends z.ZodType>(schema: S, input: unknown, what = 'body'): z.infer<S> {
  const unstorable = unstorableText(input, what);
  if (unstorable.length > 0) throw invalid(unstorable);
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw invalid(result.error.issues.map((issue) => ({ field: fieldOf(what, issue.path), message: issue.message })));
}

function invalid(errors: FieldError[]): HttpError {
  return new HttpError('invalid_request', errors.map((e) => `${e.field}: ${e.message}`).join('; '), { errors });
}

function fieldOf(what: string, path: readonly PropertyKey[]): string {
  return [what, ...path].reduce<string>(
    (field, key) => (typeof key === 'number' ? `${field}[${key}]` : field ? `${field}.${String(key)}` : String(key)),
    '',
  );
}

// eslint-disable-next-line no-control-regex -- the NUL character is what this looks for
const NUL = /\u0000/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Every string in `input` (keys included) that is not text PostgreSQL stores, by field. */
function unstorableText(input: unknown, what: string): FieldError[] {
  const found: FieldError[] = [];
  const visit = (value: unknown, path: PropertyKey[]) => {
    if (typeof value === 'string') {
      const reason = NUL.test(value)
        ? 'contains a NUL character, which cannot be stored'
        : LONE_SURROGATE.test(value)
          ? 'contains a lone UTF-16 surrogate (not valid Unicode text)'
          : undefined;
      if (reason) found.push({ field: fieldOf(what, path), message: reason });
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => visit(item, [...path, index]));
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        visit(key, [...path, key]);
        visit(item, [...path, key]);
      }
    }
  };
  visit(input, []);
  return found;
}
