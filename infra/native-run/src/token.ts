// `pnpm token [customer-id] [email]`: mints a customer token for the orders API, as an identity
// provider would, with the system's JWT_SECRET (the native run's development key when unset).
// For a compose system, the key its first start generated:
//   JWT_SECRET=$(docker compose exec -T orders-api cat /run/idem-secrets/jwt-secret) pnpm token ada
// Its `email` claim (default <customer-id>@example.com) is where the customer's receipts go. Use
// it as `Authorization: Bearer <token>`.
import { customerToken } from './tokens.js';

const [customerId = 'ada', email] = process.argv.slice(2);
if (customerId.length > 255) {
  console.error('a customer id has at most 255 characters');
  process.exit(2);
}
if (email !== undefined && !/^[^\s@]+@[^\s@]+$/.test(email)) {
  console.error(`"${email}" is not an e-mail address`);
  process.exit(2);
}
if (!process.env.JWT_SECRET) {
  console.error(
    "signed with the native run's development key (JWT_SECRET is unset); for a compose system:\n" +
      `  JWT_SECRET=$(docker compose exec -T orders-api cat /run/idem-secrets/jwt-secret) pnpm token ${customerId}`,
  );
}
console.log(await customerToken(customerId, email === undefined ? {} : { email }));
