// What consume-path.unit.spec.ts walks to show that a closure ends a walk: nothing runs this.

/** Where both walks want to go. */
export function inserts(): string {
  return 'INSERT INTO processed_messages';
}

const hidden = (
  () => () =>
    inserts()
)();

/** Calls through a variable holding a closure: "go to definition" lands on the variable. */
export function throughAClosure(): string {
  return hidden();
}

/** Calls a named function: "go to definition" lands on it. */
export function throughAFunction(): string {
  return inserts();
}
