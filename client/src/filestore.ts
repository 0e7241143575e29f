/// <reference types="node" />
// The operation runner's records in a directory, one JSON file per name,
// for a Node server without a database at hand. Node only: the server
// entry (server.ts) exports it, the browser core never imports this file.
//
// Every write goes to a temporary file in the same directory, is fsynced,
// and only then takes the record's name (rename, or link for create), and
// the directory is fsynced after: a kill -9 or a power cut leaves the old
// record or the new one, never a torn one. A temporary file left by a
// killed writer ends in .tmp and is never read.
import { randomUUID } from 'node:crypto';
import { link, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { KeyStore } from './keystore.js';

/** The longest name the file store takes, encoded: a file name must stay under the file system's 255 bytes. */
export const fileKeyStoreMaxName = 200;

/** A store of one JSON file per name under dir (created when missing). */
export function fileKeyStore(dir: string): KeyStore {
  let made: Promise<unknown> | null = null;
  const ready = () => (made ??= mkdir(dir, { recursive: true }));
  const path = (name: string) => join(dir, fileName(name));

  /** Writes value to a new temporary file, synced; its path. */
  async function temporary(value: string): Promise<string> {
    await ready();
    const tmp = join(dir, `.${randomUUID()}.tmp`);
    const f = await open(tmp, 'wx');
    try {
      await f.writeFile(value, 'utf8');
      await f.sync();
    } finally {
      await f.close();
    }
    return tmp;
  }

  async function syncDir(): Promise<void> {
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  return {
    async get(name) {
      try {
        return await readFile(path(name), 'utf8');
      } catch (err) {
        if (code(err) === 'ENOENT') return null;
        throw err;
      }
    },
    async create(name, value) {
      const target = path(name);
      const tmp = await temporary(value);
      try {
        // link fails when the name exists: a create-if-absent as atomic as rename.
        await link(tmp, target);
      } catch (err) {
        if (code(err) === 'EEXIST') return false;
        throw err;
      } finally {
        await unlink(tmp).catch(() => {});
      }
      await syncDir();
      return true;
    },
    async set(name, value) {
      const target = path(name);
      const tmp = await temporary(value);
      try {
        await rename(tmp, target);
      } catch (err) {
        await unlink(tmp).catch(() => {});
        throw err;
      }
      await syncDir();
    },
    async delete(name) {
      try {
        await unlink(path(name));
      } catch (err) {
        if (code(err) === 'ENOENT') return;
        throw err;
      }
      await syncDir();
    },
  };
}

/** name's file: percent-encoded (no slash, no leading dot), .json. */
export function fileName(name: string): string {
  const encoded = encodeURIComponent(name).replace(/^\./, '%2E');
  if (name === '' || encoded.length > fileKeyStoreMaxName) {
    throw new RangeError(`fileKeyStore: a name must be 1 to ${fileKeyStoreMaxName} characters once encoded; got ${encoded.length}`);
  }
  return `${encoded}.json`;
}

function code(err: unknown): string | undefined {
  return (err as { code?: string } | null)?.code;
}
