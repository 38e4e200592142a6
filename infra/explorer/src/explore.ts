import { dropDatabase } from '@idem/database';
import { Crash, type Model, type Service, type Story } from './model.js';
import { interleavings, Scheduler, type Choice } from './scheduler.js';

/**
 * One schedule: the steps of one order's story at a service, in order; a `together` step runs two
 * at once, statement by statement, as its `choices` say. Written as a counterexample's file and
 * read back by `--replay`.
 */
export interface Schedule {
  readonly model: string;
  readonly wrongWay?: string | undefined;
  readonly story: string;
  readonly actions: readonly Action[];
}

export type Action =
  | { readonly step: string; readonly crash?: boolean }
  | { readonly together: readonly [string, string]; readonly choices: readonly string[] };

export interface Counterexample {
  readonly schedule: Schedule;
  /** Its steps, the pair's statements in the order they ran, and the invariants broken. */
  readonly trace: readonly string[];
  readonly broken: readonly string[];
}

export interface ExploreOptions {
  readonly wrongWay?: string;
  /**
   * Only the interleavings of one pair of one story, every one of them even past a counterexample:
   * a small space to look at whole (the console's).
   */
  readonly only?: { readonly story: string; readonly pair: readonly [string, string] };
  /** Called after each schedule with what it did and how it ended. */
  readonly onSchedule?: (schedule: Explored) => void;
  /**
   * Gives the run up (its caller left): its database is dropped at once, with its sessions and
   * whatever statement they wait on, and the run rejects with the signal's reason. @defaultValue none
   */
  readonly signal?: AbortSignal;
}

/** One schedule run: its steps, the statements in the order they ran, what broke, and its final state. */
export interface Explored {
  readonly actions: readonly Action[];
  readonly trace: readonly string[];
  readonly broken: readonly string[];
  /** The final state as the service describes it, without ids or times ({@link Report.states} counts distinct ones). */
  readonly state: string;
}

export interface Report {
  readonly model: string;
  readonly schedules: { readonly sequential: number; readonly crashes: number; readonly concurrent: number };
  readonly states: number;
  /** The schedules that passed through each documented window (see {@link Service.windows}). */
  readonly windows: Readonly<Record<string, number>>;
  readonly ms: number;
  readonly counterexamples: readonly Counterexample[];
}

/**
 * Explores one service: for each story, every order of delivery of its steps (each twice, the
 * message and its duplicate, unless the story says once) that causality allows, the same with each step's first delivery
 * crashing at its switch, and every pair of its steps run at once in every interleaving of their
 * statements. After each schedule: the rest of the story, the service settled, the invariants.
 * Stops a kind of schedule at its first counterexample.
 */
export async function explore(model: Model, options: ExploreOptions = {}): Promise<Report> {
  const started = performance.now();
  const { only, signal } = options;
  signal?.throwIfAborted();
  const service = await model.open({ wrongWay: options.wrongWay });
  // Abandoned: the database goes now, not at the next schedule, since a statement may wait long
  // (a lock, a slow server); dropping it ends every session, and the run fails where it stands.
  const abandon = () => void dropDatabase(service.databaseUrl).catch(() => {});
  signal?.addEventListener('abort', abandon, { once: true });
  // What a dropped database's sessions say as they are closed changes nothing.
  const unlessAbandoned = (error: unknown) => {
    if (!signal?.aborted) throw error;
  };
  const scheduler = await Scheduler.on(service.databaseUrl).catch(async (error: unknown) => {
    signal?.removeEventListener('abort', abandon);
    await service.close().catch(unlessAbandoned);
    throw signal?.aborted ? signal.reason : error;
  });
  const states = new Set<string>();
  const counterexamples: Counterexample[] = [];
  const counts = { sequential: 0, crashes: 0, concurrent: 0 };
  const windows: Record<string, number> = {};
  const at = (story: Story, actions: Action[]): Schedule => ({
    model: model.name,
    ...(options.wrongWay ? { wrongWay: options.wrongWay } : {}),
    story: story.name,
    actions,
  });
  try {
    signal?.throwIfAborted();
    for (const story of service.stories.filter((s) => !only || s.name === only.story)) {
      const found = (kind: keyof typeof counts) => async (actions: Action[]) => {
        signal?.throwIfAborted();
        counts[kind]++;
        const outcome = await perform(service, scheduler, story, actions);
        states.add(outcome.state);
        for (const window of new Set(outcome.windows)) windows[window] = (windows[window] ?? 0) + 1;
        if (outcome.broken.length > 0)
          counterexamples.push({ schedule: at(story, outcome.actions), trace: outcome.trace, broken: outcome.broken });
        options.onSchedule?.(outcome);
        return outcome;
      };
      if (!only) {
        await untilBroken(orders(story), found('sequential'));
        await untilBroken(crashedOrders(story), found('crashes'));
      }
      const chosen = [...pairs(story)].filter(
        ({ steps: [a, b] }) => !only || (a === only.pair[0] && b === only.pair[1]),
      );
      for (const pair of chosen) {
        const run = found('concurrent');
        for await (const outcome of interleavings((choices) => run([...pair.before, together(pair, choices)]))) {
          if (outcome.broken.length > 0 && !only) break;
        }
      }
    }
  } catch (error) {
    throw signal?.aborted ? signal.reason : error;
  } finally {
    signal?.removeEventListener('abort', abandon);
    await scheduler.close().catch(unlessAbandoned);
    await service.close().catch(unlessAbandoned);
  }
  return {
    model: model.name,
    schedules: counts,
    states: states.size,
    windows,
    ms: Math.round(performance.now() - started),
    counterexamples,
  };
}

/** Runs one schedule from a fresh start (a replay's too), then the rest of its story, settles, and checks. */
export async function perform(
  service: Service,
  scheduler: Scheduler,
  story: Story,
  actions: readonly Action[],
): Promise<{
  actions: Action[];
  choices: Choice[];
  trace: string[];
  broken: string[];
  windows: string[];
  state: string;
}> {
  await service.reset();
  const done: Action[] = [];
  let choices: Choice[] = [];
  const trace: string[] = [];
  for (const action of actions) {
    if ('step' in action) {
      trace.push(`${action.step}${action.crash ? ' (crashes)' : ''}`);
      await service.step(action.step, { crash: action.crash ?? false }).catch(unlessCrash);
      done.push(action);
      continue;
    }
    const [a, b] = action.together;
    const names = sides(action.together);
    const ran = await scheduler.run(
      { [names[0]]: () => service.step(a), [names[1]]: () => service.step(b) },
      action.choices,
    );
    choices = ran.choices;
    trace.push(...ran.trace);
    done.push({ together: action.together, choices: choices.map((c) => c.chosen) });
    // A side the database refused (a deadlock, say) is delivered again, as the broker would.
    for (const [i, name] of names.entries()) {
      if (failed(ran.results[name])) {
        trace.push(`${action.together[i]!} (again)`);
        await service.step(action.together[i]!).catch(unlessCrash);
      }
    }
  }
  for (const rest of remaining(story, done)) {
    trace.push(`${rest} (the rest of the story)`);
    await service.step(rest).catch(unlessCrash);
  }
  await service.settle();
  const broken = await service.check(story);
  const windows = (await service.windows?.(story)) ?? [];
  const state = await service.state();
  return { actions: done, choices, trace, broken, windows, state };
}

/** The two sides' names: the steps', told apart when a step races its own duplicate. */
const sides = ([a, b]: readonly [string, string]): [string, string] => (a === b ? [`${a}#1`, `${b}#2`] : [a, b]);

function failed(result: PromiseSettledResult<unknown> | undefined): boolean {
  if (!result || result.status === 'rejected') return true;
  const value = result.value as { outcome?: string } | undefined;
  return value?.outcome === 'transient_failure';
}

function unlessCrash(error: unknown): void {
  if (!(error instanceof Crash)) throw error;
}

/** The story's steps not yet delivered by `done` (a crashed delivery does not count), in the story's order. */
function remaining(story: Story, done: readonly Action[]): string[] {
  const delivered = new Set(
    done.flatMap((action) => ('step' in action ? (action.crash ? [] : [action.step]) : action.together)),
  );
  return story.steps.filter((step) => !delivered.has(step));
}

async function untilBroken(schedules: Iterable<Action[]>, run: (actions: Action[]) => Promise<{ broken: string[] }>) {
  for (const actions of schedules) if ((await run(actions)).broken.length > 0) return;
}

/** Every distinct order of the story's deliveries in which no step comes before its cause was processed. */
export function* orders(story: Story): Generator<Action[]> {
  for (const order of permutations(deliveries(story)))
    if (causal(order, story.causes ?? {})) yield order.map((step) => ({ step }));
}

/** Each step of the story as many times as it is delivered. */
const deliveries = (story: Story) => story.steps.flatMap((step) => Array<string>(story.copies ?? 2).fill(step));

/** {@link orders}, with one step's first delivery crashing at its switch (its second then processes it). */
export function* crashedOrders(story: Story): Generator<Action[]> {
  for (const crashed of story.steps) {
    for (const order of permutations(deliveries(story))) {
      const first = order.indexOf(crashed);
      if (!causal(order, story.causes ?? {}, first)) continue;
      yield order.map((step, i) => (i === first ? { step, crash: true } : { step }));
    }
  }
}

function causal(order: readonly string[], causes: Readonly<Record<string, string>>, crashedAt = -1): boolean {
  return order.every((step, i) => {
    const cause = causes[step];
    if (!cause) return true;
    const processed = order.findIndex((other, j) => other === cause && j !== crashedAt);
    return processed !== -1 && processed < i;
  });
}

/** The distinct permutations of `items` (a multiset), in lexicographic order. */
export function* permutations(items: readonly string[]): Generator<string[]> {
  const order = [...items].sort();
  for (;;) {
    yield [...order];
    let i = order.length - 2;
    while (i >= 0 && order[i]! >= order[i + 1]!) i--;
    if (i < 0) return;
    let j = order.length - 1;
    while (order[j]! <= order[i]!) j--;
    [order[i], order[j]] = [order[j]!, order[i]!];
    order.splice(i + 1, order.length - i - 1, ...order.slice(i + 1).reverse());
  }
}

interface Pair {
  readonly steps: readonly [string, string];
  /** The story's steps delivered first: those before the pair's first step, and the pair's causes. */
  readonly before: readonly Action[];
}

const together = (pair: Pair, choices: readonly string[]): Action => ({ together: pair.steps, choices });

/**
 * Every pair of the story's steps that can meet (neither causes the other), a step with its own
 * duplicate too, each set up by the steps the story sends before them.
 */
export function* pairs(story: Story): Generator<Pair> {
  const { steps, causes = {} } = story;
  for (const [i, a] of steps.entries()) {
    for (const b of steps.slice(i)) {
      if (causes[a] === b || causes[b] === a) continue;
      const needed = new Set([...steps.slice(0, i), causes[a], causes[b]].filter((s): s is string => !!s));
      needed.delete(a);
      needed.delete(b);
      yield { steps: [a, b], before: steps.filter((s) => needed.has(s)).map((step) => ({ step })) };
    }
  }
}
