// @chargeonce/client/vue: the charger's state as a Vue ref. The composable
// holds nothing of its own: the charger is the store, and a shallowRef
// follows it through subscribe, so every component that uses one charger
// sees the same state. The subscription ends with the component (or the
// effect scope) that called useCharge.
import { onScopeDispose, shallowRef, type ShallowRef } from 'vue';
import type { Charger, PayOptions } from './charger.js';
import type { ChargerState, Outcome, PayInput } from './types.js';

export interface UseCharge {
  /** The charger's state, replaced (never changed in place) on every transition. */
  state: Readonly<ShallowRef<ChargerState>>;
  pay(input: PayInput, options?: PayOptions): Promise<Outcome>;
  resume(): Promise<Outcome | null>;
  reset(): void;
  handleNextAction(): void;
}

/** Call it in a component's setup() (or inside an effectScope): it unsubscribes when that scope ends. */
export function useCharge(charger: Charger): UseCharge {
  const state = shallowRef(charger.state);
  onScopeDispose(charger.subscribe((s) => (state.value = s)));
  return {
    state,
    pay: (input, options) => charger.pay(input, options),
    resume: () => charger.resume(),
    reset: () => charger.reset(),
    handleNextAction: () => charger.handleNextAction(),
  };
}
