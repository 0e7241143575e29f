// @chargeonce/client/react: the charger's state as React state. The hook
// holds nothing of its own: the charger is the store, read with
// useSyncExternalStore, so every component that uses one charger sees the
// same state, and a server render sees idle.
import { useCallback, useSyncExternalStore } from 'react';
import type { Charger } from './charger.js';
import type { ChargerState, Outcome, PayInput } from './types.js';
import type { PayOptions } from './charger.js';

export interface UseCharge {
  state: ChargerState;
  pay(input: PayInput, options?: PayOptions): Promise<Outcome>;
  resume(): Promise<Outcome | null>;
  reset(): void;
  handleNextAction(): void;
}

const idle: ChargerState = { kind: 'idle', flags: { offline: false, hidden: false, follower: false }, paused: false };

export function useCharge(charger: Charger): UseCharge {
  const subscribe = useCallback((fn: () => void) => charger.subscribe(fn), [charger]);
  const state = useSyncExternalStore(
    subscribe,
    () => charger.state,
    () => idle,
  );
  const pay = useCallback((input: PayInput, options?: PayOptions) => charger.pay(input, options), [charger]);
  const resume = useCallback(() => charger.resume(), [charger]);
  const reset = useCallback(() => charger.reset(), [charger]);
  const handleNextAction = useCallback(() => charger.handleNextAction(), [charger]);
  return { state, pay, resume, reset, handleNextAction };
}
