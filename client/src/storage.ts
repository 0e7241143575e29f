// Where the attempt record lives: sessionStorage (this tab, the default),
// localStorage (shared by the origin's tabs) or the caller's own. Storage
// that fails (quota, blocked, private mode, a SecurityError on access)
// falls back to memory and says so once; it never throws to the caller,
// since an unpersisted key still charges at most once within this page.
import type { KeyValueStorage } from './types.js';

export type StorageSpec = 'session' | 'local' | KeyValueStorage;

export interface SafeStorage {
  get(k: string): string | null;
  set(k: string, v: string): void;
  remove(k: string): void;
}

/** The storage spec as a SafeStorage; onFallback hears, once, why memory is used instead. */
export function resolveStorage(spec: StorageSpec | undefined, onFallback: (reason: string) => void): SafeStorage {
  const own = spec && typeof spec === 'object';
  const got = own ? { storage: spec } : webStorage(spec === 'local' ? 'localStorage' : 'sessionStorage');
  const real = got.storage;
  const memory = new Map<string, string>();
  let warned = false;
  const fallback = (reason: string) => {
    if (!warned) onFallback(reason);
    warned = true;
  };
  if (!real) fallback(got.reason ?? 'no storage');
  /** Runs call on the real storage; false when there is none or it failed. */
  const attempt = (what: string, call: (s: KeyValueStorage) => void): boolean => {
    if (!real) return false;
    try {
      call(real);
      return true;
    } catch (err) {
      fallback(`${what} failed: ${describe(err)}`);
      return false;
    }
  };
  return {
    get(k) {
      let v: string | null = memory.get(k) ?? null;
      if (!memory.has(k)) attempt('getItem', (s) => (v = s.getItem(k)));
      return v;
    },
    set(k, v) {
      if (attempt('setItem', (s) => s.setItem(k, v))) memory.delete(k);
      else memory.set(k, v);
    },
    remove(k) {
      memory.delete(k);
      attempt('removeItem', (s) => s.removeItem(k));
    },
  };
}

/** window.localStorage or sessionStorage, or why it cannot be had (access itself may throw). */
export function webStorage(name: 'localStorage' | 'sessionStorage'): { storage: KeyValueStorage | null; reason?: string } {
  try {
    const s = (globalThis as unknown as Record<string, KeyValueStorage | undefined>)[name];
    if (!s) return { storage: null, reason: `no ${name}` };
    s.setItem('chargeonce:probe', '1');
    s.removeItem('chargeonce:probe');
    return { storage: s };
  } catch (err) {
    return { storage: null, reason: `${name} unavailable: ${describe(err)}` };
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
