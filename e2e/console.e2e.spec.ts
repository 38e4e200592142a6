/**
 * The teaching console in a real browser, the way a student uses it: switch a fault on, place
 * an order from the form, and watch the order's timeline fill in live.
 */
import { randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import { asOperator, duplicateStory, getJson, SERVICES, type RunningSystem } from '@idem/native-run';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshotPath } from './browser.js';
import { EXERCISE_TIMEOUT_MS, EXERCISES, placeOrder, switchAllOff, switchOn, type Classroom } from './exercises.js';
import { readRows, startIsolatedSystem } from './support.js';

let system: RunningSystem;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  system = await startIsolatedSystem({
    console: true,
    restartOnExit: true,
    env: { IDEM_FAULTS_ENABLED: '1' },
  });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
}, 120_000);
// Every test starts with every switch off.
afterEach(async () => {
  for (const process of SERVICES) await switchAllOff(classroom(), process);
});
afterAll(async () => {
  await browser?.close();
  await system?.stop();
});

const classroom = (): Classroom => ({ page, console: system.urls.console, runs: 'native', mailSearch: true });

describe("concepts.md's exercises, as written, under pnpm start", () => {
  for (const exercise of EXERCISES) it(exercise.title, () => exercise.run(classroom()), EXERCISE_TIMEOUT_MS);
});

describe("each API's operator token", () => {
  it("opens that API alone: notifications' is refused by orders and by payments, and taken by notifications", async () => {
    const read = async (url: string, token: string) =>
      (await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status;
    const notifications = system.adminTokens.notifications;
    expect(await read(`${system.urls.orders}/dead-letters`, notifications)).toBe(403);
    expect(await read(`${system.urls.orders}/orders`, notifications)).toBe(401); // no customer either
    expect(await read(`${system.urls.payments}/payments?orderId=${randomUUID()}`, notifications)).toBe(403);
    expect(await read(`${system.urls.notifications}/emails?orderId=${randomUUID()}`, notifications)).toBe(200);
    expect(await read(`${system.urls.orders}/dead-letters`, system.adminTokens.orders)).toBe(200);
    // The console's own token (its login beyond loopback) opens no API.
    expect(await read(`${system.urls.orders}/dead-letters`, system.adminToken)).toBe(403);
  });
});

describe('the console', () => {
  it('can place an order after the switches page was opened ten times in a minute: no failed authentication counted', async () => {
    for (let load = 0; load < 10; load++) {
      await page.goto(`${system.urls.console}/faults`);
      expect(await page.locator('tr[data-process] [data-pid]').count()).toBe(SERVICES.length);
    }
    await placeOrder(classroom());
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 30_000 }).toBe('PAID');
  }, 60_000);

  it('lists the lessons and runs one both ways', async () => {
    await page.goto(`${system.urls.console}/lessons`);
    expect(await page.locator('tr[data-lesson]').count()).toBe(4);
    await page.locator('tr[data-lesson="no-inbox"]').getByRole('button', { name: 'run it both ways' }).click();
    expect(await page.locator('pre[data-way="wrong"]').textContent()).toContain('DOUBLED');
    expect(await page.locator('pre[data-way="right"]').textContent()).toContain('EXACTLY ONCE');
    await page.screenshot({ path: await screenshotPath('lesson'), fullPage: true });
  }, 60_000);

  it('explores every interleaving of a cancel and a reservation: none breaks the right way, some break with the row left unlocked', async () => {
    await page.goto(`${system.urls.console}/explorer`);
    await page.getByRole('button', { name: 'explore it the right way' }).click();
    expect(Number(await page.locator('#schedules').textContent())).toBeGreaterThan(1);
    expect(await page.locator('#broken').textContent()).toBe('0');
    expect(await page.locator('[data-state]').allTextContents()).not.toContainEqual(
      expect.stringContaining('1 charged, 0 refunded'),
    );
    await page.getByRole('button', { name: "explore it with the order's row left unlocked" }).click();
    expect(Number(await page.locator('#broken').textContent())).toBeGreaterThan(0);
    const broken = page.locator('[data-broken]').first();
    await broken.locator('summary').click();
    expect(await broken.textContent()).toContain('the cancelled order keeps 4999 cents at the provider');
    expect(await broken.locator('pre').textContent()).toMatch(/reserved: .*\n[\s\S]*cancelled: COMMIT/);
    await page.screenshot({ path: await screenshotPath('explorer'), fullPage: true });
  }, 120_000);

  it("pnpm demo's story with a duplicate counts, per consumer, one processed and one suppressed delivery", async () => {
    const story = await duplicateStory(system.urls, {
      ordersToken: system.adminTokens.orders,
      redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      queuePrefix: system.queuePrefix,
    });
    expect(story.ran && story.status).toBe('PAID');
    if (!story.ran) return;
    for (const consumer of ['inventory.order-placed.v1', 'notifications.order-placed.v1']) {
      expect(story.consumers).toContainEqual({ consumer, processed: 1, suppressed: 1 });
    }
    expect(story.consumers.every((c) => c.processed === 1)).toBe(true);
  }, 60_000);

  it('runs the exactly-once checker against the running system', async () => {
    await page.goto(`${system.urls.console}/checker`);
    expect(await page.locator('#verdict').textContent()).toContain('OK');
    expect(await page.locator('table').last().textContent()).toContain('inventory.order-placed.v1');
    await page.screenshot({ path: await screenshotPath('checker'), fullPage: true });
  }, 60_000);

  describe('a page on another origin', () => {
    let attacker: Server;
    let attackerUrl: string;
    /** What the attacker's page posts: each of the console's state-changing forms. */
    let forms: Record<string, { action: string; fields: Record<string, string> }>;
    beforeAll(async () => {
      forms = {
        fault: { action: '/faults/orders', fields: { name: 'publish-twice', target: 'publisher', probability: '1' } },
        'all switches off': { action: '/faults/orders/clear', fields: {} },
        order: { action: '/orders', fields: { scenario: 'paid' } },
        lesson: { action: '/lessons/no-inbox', fields: {} },
        explorer: { action: '/explorer/wrong', fields: {} },
      };
      // A page served from another local origin that submits a form to the console as soon as it loads.
      attacker = createServer((req, res) => {
        const form = forms[decodeURIComponent(new URL(req.url!, 'http://x').searchParams.get('form') ?? '')];
        if (!form) return void res.writeHead(404).end();
        const inputs = Object.entries(form.fields)
          .map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`)
          .join('');
        res.writeHead(200, { 'content-type': 'text/html' }).end(
          `<!doctype html><body><form id="f" method="post" action="${system.urls.console}${form.action}">${inputs}</form>
<script>document.getElementById('f').submit()</script></body>`,
        );
      });
      await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
      attackerUrl = `http://localhost:${(attacker.address() as { port: number }).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => attacker.close(() => resolve())));

    const ordersPlaced = async () =>
      Number((await readRows<{ n: string }>(system.databaseUrls.orders, 'SELECT count(*) AS n FROM orders'))[0]!.n);
    const rulesInOrders = async () =>
      (await getJson<{ rules: unknown[] }>(`${system.urls.orders}/faults`, asOperator(system.adminTokens.orders))).rules
        .length;

    it('auto-submitting each state-changing form of the console changes nothing: every post is refused', async () => {
      await switchOn(classroom(), 'orders', 'crash-after-commit', 'nobody.v1'); // something "switch all off" could clear
      const before = { orders: await ordersPlaced(), rules: await rulesInOrders() };
      for (const name of Object.keys(forms)) {
        const refused = page.waitForResponse(
          (res) => res.url().startsWith(system.urls.console) && res.request().method() === 'POST',
        );
        await page.goto(`${attackerUrl}/?form=${encodeURIComponent(name)}`);
        const response = await refused;
        expect(response.status(), name).toBe(403);
        expect(await response.text(), name).toMatch(/another web page|did not come from a page of this console/);
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // anything it had started would show by now
      expect({ orders: await ordersPlaced(), rules: await rulesInOrders() }).toEqual(before);
      await page.screenshot({ path: await screenshotPath('cross-origin-refused'), fullPage: true });
    }, 60_000);

    it('cannot read the console under another name (DNS rebinding): a foreign Host is refused', async () => {
      const port = new URL(system.urls.console).port;
      const status = await new Promise<number>((resolve, reject) => {
        const get = request(
          { host: '127.0.0.1', port, path: '/faults', headers: { host: `evil.example:${port}` } },
          (res) => resolve(res.statusCode!),
        );
        get.on('error', reject).end();
      });
      expect(status).toBe(403);
      // ... while the console's own pages still work in the same browser.
      await page.goto(`${system.urls.console}/faults`);
      expect(await page.locator('tr[data-process="orders"]').count()).toBe(1);
    });
  });
});
