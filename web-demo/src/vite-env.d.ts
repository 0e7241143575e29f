/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** The demo merchant's name, for the provider ledger; demo when unset. */
  readonly VITE_DEMO_MERCHANT?: string;
}

interface ImportMeta {
  readonly env: ImportMetaEnv;
}
