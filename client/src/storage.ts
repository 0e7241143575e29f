// Where the attempt record lives: sessionStorage (this tab, the default),
// localStorage (shared by the origin's tabs) or the caller's own. Storage
// that fails (quota, blocked, private mode, a SecurityError on access)
// falls back to memory and says so once; it never throws to the caller,
// since an unpersisted key still charges at most once within this page.
import type { KeyValueStorage } from './types.js';

export type StorageSpec = 'session' | 'local' | KeyValueStorage;

export class SafeStorage {
  private readonly memory = new Map<string, string>();
  private warned = false;

  constructor(
    private readonly real: KeyValueStorage | null,
    private readonly onFallback: (reason: string) => void,
    /** Whether other tabs see it: localStorage, or a storage the caller says is shared. */
    readonly shared: boolean,
    reason?: string,
  ) {
    if (!real) this.fallback(reason ?? 'no storage');
  }

  get(k: string): string | null {
    if (this.memory.has(k)) return this.memory.get(k)!;
    if (!this.real) return null;
    try {
      return this.real.getItem(k);
    } catch (err) {
      this.fallback(`getItem failed: ${describe(err)}`);
      return null;
    }
  }

  set(k: string, v: string): void {
    if (this.real) {
      try {
        this.real.setItem(k, v);
        this.memory.delete(k);
        return;
      } catch (err) {
        this.fallback(`setItem failed: ${describe(err)}`);
      }
    }
    this.memory.set(k, v);
  }

  remove(k: string): void {
    this.memory.delete(k);
    if (!this.real) return;
    try {
      this.real.removeItem(k);
    } catch (err) {
      this.fallback(`removeItem failed: ${describe(err)}`);
    }
  }

  private fallback(reason: string): void {
    if (this.warned) return;
    this.warned = true;
    this.onFallback(reason);
  }
}

/** The storage spec as a SafeStorage; onFallback hears, once, why memory is used instead. */
export function resolveStorage(spec: StorageSpec | undefined, onFallback: (reason: string) => void): SafeStorage {
  if (spec && typeof spec === 'object') return new SafeStorage(spec, onFallback, false);
  const name = spec === 'local' ? 'localStorage' : 'sessionStorage';
  const got = webStorage(name);
  return new SafeStorage(got.storage, onFallback, spec === 'local', got.reason);
}

/** window.localStorage or sessionStorage, or why it cannot be had (access itself may throw). */
export function webStorage(name: 'localStorage' | 'sessionStorage'): { storage: KeyValueStorage | null; reason?: string } {
  try {
    const s = (globalThis as unknown as Record<string, KeyValueStorage | undefined>)[name];
    if (!s) return { storage: null, reason: `no ${name}` };
    const probe = 'chargeonce:probe';
    s.setItem(probe, '1');
    s.removeItem(probe);
    return { storage: s };
  } catch (err) {
    return { storage: null, reason: `${name} unavailable: ${describe(err)}` };
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
