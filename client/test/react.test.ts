import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it, vi } from 'vitest';
import { createCharger } from '../src/charger.js';
import { ChargerStateError } from '../src/errors.js';
import { useCharge, type UseCharge } from '../src/react.js';
import { FakeServer, MemoryStorage } from './fakes.js';

describe('useCharge', () => {
  it('reads the charger\'s state and hands on pay, resume, reset and handleNextAction', async () => {
    const server = new FakeServer();
    const charger = createCharger({ endpoint: '/graphql', publishableKey: 'co_pk_1', session: 'cs_1', storage: new MemoryStorage(), crossTab: false, fetch: server.fetch, environment: {} });
    let hook!: UseCharge;
    function Pay() {
      hook = useCharge(charger);
      return createElement('output', null, hook.state.kind);
    }
    expect(renderToString(createElement(Pay))).toBe('<output>idle</output>');
    const spy = vi.spyOn(charger, 'subscribe');
    await expect(hook.pay({ paymentMethod: 'pm' })).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(charger.state.kind).toBe('settled');
    await expect(hook.resume()).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(() => hook.handleNextAction()).toThrow(ChargerStateError); // settled: nowhere to go
    hook.reset();
    expect(charger.state.kind).toBe('idle');
    expect(spy).not.toHaveBeenCalled(); // a server render never subscribes
    charger.close();
  });
});
