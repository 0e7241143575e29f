// Where the operation runner keeps its records: one string per name, in a
// store the caller owns (a database on a server, sessionStorage in a page).
// The runner writes a record before the first byte of its operation is
// sent, so the store must have written it when create() or set() resolves.
// The file-backed store is Node's and lives apart (filestore.ts), so that
// nothing here imports node:fs.
import type { KeyValueStorage } from './types.js';

/**
 * The caller's store of operation records, one string per name. Every
 * method is async, since a server's store is a database.
 */
export interface KeyStore {
  /** What name holds; null when nothing. */
  get(name: string): Promise<string | null>;
  /**
   * Stores value under name only if name holds nothing, atomically (a
   * database's INSERT … ON CONFLICT DO NOTHING): true when it did. Two
   * processes that start one name at once thus keep one key.
   */
  create(name: string, value: string): Promise<boolean>;
  /** Replaces what name holds. */
  set(name: string, value: string): Promise<void>;
  /** Removes name; nothing when it holds nothing. */
  delete(name: string): Promise<void>;
}

/** A store in this process's memory: for tests, and for work a restart may lose. */
export function memoryKeyStore(): KeyStore & { readonly entries: ReadonlyMap<string, string> } {
  const entries = new Map<string, string>();
  return {
    entries,
    get: async (name) => entries.get(name) ?? null,
    create: async (name, value) => {
      if (entries.has(name)) return false;
      entries.set(name, value);
      return true;
    },
    set: async (name, value) => void entries.set(name, value),
    delete: async (name) => void entries.delete(name),
  };
}

/**
 * A store on Web Storage (a page's sessionStorage or localStorage), each
 * name under prefix. Web Storage is synchronous, so create() is atomic
 * within the page.
 */
export function storageKeyStore(storage: KeyValueStorage, prefix = 'chargeonce:operation:'): KeyStore {
  return {
    get: async (name) => storage.getItem(prefix + name),
    create: async (name, value) => {
      if (storage.getItem(prefix + name) !== null) return false;
      storage.setItem(prefix + name, value);
      return true;
    },
    set: async (name, value) => storage.setItem(prefix + name, value),
    delete: async (name) => storage.removeItem(prefix + name),
  };
}
