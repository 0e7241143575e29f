// useCharge from @chargeonce/client/vue in Chromium: a component mounted
// with Vue's runtime (a render function; no template compiler) draws the
// charger's state, pays and resets on real clicks, and lets go of the
// charger when it unmounts.
import { afterEach, describe, expect, it } from 'vitest';
import { userEvent } from 'vitest/browser';
import { createApp, h, type App } from 'vue';
import type { Charger } from '../src/index.js';
import { useCharge } from '../src/vue.js';
import { FakeServer } from '../test/fake-chargeonce.js';
import { card, charger, closeChargers, newSession } from './chargers.js';

let app: App | null = null;
let host: HTMLElement | null = null;
afterEach(() => {
  app?.unmount();
  host?.remove();
  app = host = null;
  closeChargers();
  sessionStorage.clear();
});

/** c, with a count of the subscriptions made through it that are not yet ended. */
function countSubscribers(c: Charger): () => number {
  let n = 0;
  const subscribe = c.subscribe;
  c.subscribe = (fn) => {
    n++;
    const off = subscribe(fn);
    return () => {
      n--;
      off();
    };
  };
  return () => n;
}

/** Mounts a checkout on c: the state's kind, Pay while idle, Try again once settled. */
function mount(c: Charger): { kind: () => string | null } {
  host = document.createElement('div');
  document.body.append(host);
  app = createApp({
    setup() {
      const { state, pay, reset } = useCharge(c);
      return () =>
        h('div', [
          h('output', state.value.kind),
          h('button', { disabled: state.value.kind !== 'idle', onClick: () => void pay(card) }, 'Pay'),
          h('button', { disabled: state.value.kind !== 'settled', onClick: () => reset() }, 'Try again'),
        ]);
    },
  });
  app.mount(host);
  const output = host.querySelector('output')!;
  return { kind: () => output.textContent };
}

const button = (name: string) => [...host!.querySelectorAll('button')].find((b) => b.textContent === name)!;

describe('useCharge (Vue)', () => {
  it('draws the state as it moves, from idle through pay() to settled, and reset() back to idle', async () => {
    const server = new FakeServer();
    let answer!: () => void;
    server.gate = new Promise((r) => (answer = r)); // the server holds its answer until the test lets it go
    const c = charger(server, { session: newSession() });
    const view = mount(c);
    expect(view.kind()).toBe('idle');

    await userEvent.click(button('Pay'));

    // The attempt is on the wire: the page shows it, and Pay is no longer offered.
    await expect.poll(() => server.chargeCards.length).toBe(1);
    await expect.poll(view.kind).not.toBe('idle');
    expect(button('Pay').disabled).toBe(true);
    answer();
    await expect.poll(view.kind).toBe('settled');
    expect(c.state.kind).toBe('settled');

    await userEvent.click(button('Try again'));
    await expect.poll(view.kind).toBe('idle');
    expect(button('Pay').disabled).toBe(false);
  });

  it('unsubscribes when the component unmounts', async () => {
    const server = new FakeServer();
    const c = charger(server, { session: newSession() });
    const subscribers = countSubscribers(c);
    const view = mount(c);
    expect(subscribers()).toBe(1);
    await userEvent.click(button('Pay'));
    await expect.poll(view.kind).toBe('settled');

    app!.unmount();
    app = null;

    expect(subscribers()).toBe(0);
  });
});
