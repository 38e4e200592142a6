/**
 * The teaching console in a real browser, the way a student uses it: switch a fault on, place
 * an order from the form, and watch the order's timeline fill in live.
 */
import { createServer, request, type Server } from 'node:http';
import { asOperator, duplicateStory, getJson, SERVICES, type RunningSystem } from '@idem/native-run';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshotPath } from './browser.js';
import { readRows, startIsolatedSystem } from './support.js';

const ADMIN_TOKEN = 'console-e2e-admin-token-0123';
let system: RunningSystem;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  system = await startIsolatedSystem({
    console: true,
    restartOnExit: true,
    env: { IDEM_FAULTS_ENABLED: '1', ADMIN_TOKEN },
  });
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
}, 120_000);
// Every test starts with every switch off.
afterEach(async () => {
  for (const process of SERVICES) await switchAllOff(process);
});
afterAll(async () => {
  await browser?.close();
  await system?.stop();
});

/** On the fault switches page: switches one on for a process, as a person fills the form. */
async function switchOn(process: string, name: string, target: string, count?: number) {
  await page.goto(`${system.urls.console}/faults`);
  const row = page.locator(`tr[data-process="${process}"]`);
  await row.locator('select[name="name"]').selectOption(name);
  await row.locator('input[name="target"]').fill(target);
  if (count) await row.locator('input[name="count"]').fill(String(count));
  await row.getByRole('button', { name: 'switch on' }).click();
  await expect.poll(() => row.locator('[data-rule]').allTextContents()).toContainEqual(expect.stringContaining(name));
}

async function switchAllOff(process: string) {
  await page.goto(`${system.urls.console}/faults`);
  const button = page.locator(`tr[data-process="${process}"]`).getByRole('button', { name: 'switch all off' });
  if (await button.count()) await button.click();
}

/** Places an order from the console's form; returns once the browser shows its timeline. */
async function placeOrder(scenario: string) {
  await page.goto(system.urls.console);
  await page.locator(`input[name="scenario"][value="${scenario}"]`).check();
  await page.getByRole('button', { name: 'Place order' }).click();
  await page.waitForURL(/\/orders\/[0-9a-f-]{36}$/);
}

const outcomesOf = (consumer: string) => page.locator(`[data-consumer="${consumer}"] [data-outcome]`).allTextContents();

describe('the console', () => {
  it('shows, live, each consumer of orders.order-placed.v1 processing one copy and suppressing the other under publish-twice', async () => {
    await switchOn('orders', 'publish-twice', 'publisher');
    await placeOrder('paid');
    // No reload from here on: the timeline fills in through the live view.
    for (const consumer of ['inventory.order-placed.v1', 'notifications.order-placed.v1']) {
      await expect
        .poll(() => outcomesOf(consumer), { timeout: 30_000 })
        .toEqual(expect.arrayContaining(['processed', 'duplicate']));
      expect((await outcomesOf(consumer)).sort()).toEqual(['duplicate', 'processed']);
    }
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 30_000 }).toBe('PAID');
    await expect
      .poll(() => page.locator('[data-effect="email"][data-kind="receipt"]').textContent(), { timeout: 30_000 })
      .toContain('sent 1×');
    // One business effect each: one reservation, one PaymentIntent, one receipt.
    expect(await page.locator('[data-effect="reservation"]').count()).toBe(1);
    expect(await page.locator('[data-effect="payment-intent"]').count()).toBe(1);
    expect(await page.locator('[data-effect="email"][data-kind="receipt"]').count()).toBe(1);
    await page.screenshot({ path: await screenshotPath('publish-twice-timeline'), fullPage: true });
  }, 90_000);

  it('shows a consumer killed after its commit restarting, and its redelivery ending as duplicate', async () => {
    await page.goto(`${system.urls.console}/faults`);
    const inventory = page.locator('tr[data-process="inventory"]');
    const pidBefore = await inventory.locator('[data-pid]').textContent();
    await switchOn('inventory', 'crash-after-commit', 'inventory.order-placed.v1', 1);
    await placeOrder('paid');
    const timeline = page.url();

    await expect.poll(() => outcomesOf('inventory.order-placed.v1'), { timeout: 60_000 }).toEqual(['duplicate']);
    expect(await page.locator('[data-consumer="inventory.order-placed.v1"]').textContent()).toContain(
      'the delivery that committed it never settled',
    );
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 30_000 }).toBe('PAID');
    await page.screenshot({ path: await screenshotPath('crash-after-commit-timeline'), fullPage: true });

    // The fault switches page shows the process that died and was started again.
    await page.goto(`${system.urls.console}/faults`);
    const pidAfter = await page.locator('tr[data-process="inventory"] [data-pid]').textContent();
    expect(pidAfter).not.toBe(pidBefore);
    expect(await page.locator('tr[data-process="inventory"] [data-rule]').count()).toBe(0); // started afresh
    await page.goto(timeline);
    expect(await page.locator('[data-effect="reservation"]').count()).toBe(1);
  }, 120_000);

  it('can place an order after the switches page was opened ten times in a minute: no failed authentication counted', async () => {
    for (let load = 0; load < 10; load++) {
      await page.goto(`${system.urls.console}/faults`);
      expect(await page.locator('tr[data-process] [data-pid]').count()).toBe(SERVICES.length);
    }
    await placeOrder('paid');
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 30_000 }).toBe('PAID');
  }, 60_000);

  it("runs concepts.md's exercise 4 as written: crash-after-publish for orders, no target; nothing happens twice", async () => {
    const orders = page.locator('tr[data-process="orders"]');
    await page.goto(`${system.urls.console}/faults`);
    const pidBefore = await orders.locator('[data-pid]').textContent();
    await switchOn('orders', 'crash-after-publish', '', 1);
    await placeOrder('paid'); // the orders process dies after publishing, before marking; the console sends the order again
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 60_000 }).toBe('PAID');
    const timeline = page.url();
    await page.goto(`${system.urls.console}/faults`);
    expect(await orders.locator('[data-pid]').textContent()).not.toBe(pidBefore); // it was killed, and started again
    await page.goto(timeline);
    for (const consumer of ['inventory.order-placed.v1', 'notifications.order-placed.v1']) {
      const outcomes = await outcomesOf(consumer);
      expect(
        outcomes.filter((outcome) => outcome === 'processed'),
        consumer,
      ).toHaveLength(1);
      expect(
        outcomes.every((outcome) => outcome === 'processed' || outcome === 'duplicate'),
        consumer,
      ).toBe(true);
    }
    expect(await page.locator('[data-effect="reservation"]').count()).toBe(1);
  }, 120_000);

  it('lists the lessons and runs one both ways', async () => {
    await page.goto(`${system.urls.console}/lessons`);
    expect(await page.locator('tr[data-lesson]').count()).toBe(4);
    await page.locator('tr[data-lesson="no-inbox"]').getByRole('button', { name: 'run it both ways' }).click();
    expect(await page.locator('pre[data-way="wrong"]').textContent()).toContain('DOUBLED');
    expect(await page.locator('pre[data-way="right"]').textContent()).toContain('EXACTLY ONCE');
    await page.screenshot({ path: await screenshotPath('lesson'), fullPage: true });
  }, 60_000);

  it("pnpm demo's story with a duplicate counts, per consumer, one processed and one suppressed delivery", async () => {
    const story = await duplicateStory(system.urls, {
      adminToken: ADMIN_TOKEN,
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
      (await getJson<{ rules: unknown[] }>(`${system.urls.orders}/faults`, asOperator(ADMIN_TOKEN))).rules.length;

    it('auto-submitting each state-changing form of the console changes nothing: every post is refused', async () => {
      await switchOn('orders', 'crash-after-commit', 'nobody.v1'); // something "switch all off" could clear
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
