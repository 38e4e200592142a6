/**
 * The generic packages carry any catalogue a user declares (`defineCatalogue`, @idem/contracts):
 * none of their shipped sources names an event or a consumer of the shop's (@idem/shop), not even
 * in a comment. Their tests may use the shop's catalogue; what ships may not know it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { consumers, shop } from '@idem/shop';
import { describe, expect, it } from 'vitest';
import { root } from './compose-file.js';

const GENERIC = ['contracts', 'inbox', 'outbox', 'messaging', 'database', 'runtime'];
const NAMES = [...Object.keys(shop.contracts), ...Object.keys(consumers)];

/** Every shop name each shipped source of `packages` mentions: `file: name`. */
export function shopNamesIn(
  packages: readonly string[],
  read = (path: string) => readFileSync(path, 'utf8'),
): string[] {
  return packages.flatMap((name) => {
    const src = join(root, 'packages', name, 'src');
    return readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.spec.ts') && !file.includes('generated'))
      .flatMap((file) => {
        const text = read(join(src, file));
        return NAMES.filter((shopName) => text.includes(shopName)).map(
          (shopName) => `packages/${name}/src/${file}: ${shopName}`,
        );
      });
  });
}

describe('the generic packages', () => {
  it("name none of the shop's events or consumers in what they ship", () => {
    expect(shopNamesIn(GENERIC)).toEqual([]);
  });

  it('would notice one that did', () => {
    const planted = (path: string) =>
      path.endsWith('inbox/src/inbox.ts')
        ? `${readFileSync(path, 'utf8')}\n// e.g. inventory.order-placed.v1\n`
        : readFileSync(path, 'utf8');
    expect(shopNamesIn(['inbox'], planted)).toEqual(['packages/inbox/src/inbox.ts: inventory.order-placed.v1']);
  });
});
