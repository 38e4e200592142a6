// `pnpm token [customer-id]`: mints a customer token for the orders API, as an identity provider
// would, with the system's JWT_SECRET (the native run's development key when unset; for compose,
// JWT_SECRET from .env). Use it as `Authorization: Bearer <token>`.
import { customerToken } from './tokens.js';

const customerId = process.argv[2] ?? 'ada';
if (customerId.length > 255) {
  console.error('a customer id has at most 255 characters');
  process.exit(2);
}
console.log(await customerToken(customerId));
