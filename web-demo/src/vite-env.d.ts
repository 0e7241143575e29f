/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** The demo merchant's API key; demo-key, the development server's default, when unset. */
  readonly VITE_DEMO_API_KEY?: string;
  /** The demo merchant's name, for the provider ledger; demo when unset. */
  readonly VITE_DEMO_MERCHANT?: string;
}

interface ImportMeta {
  readonly env: ImportMetaEnv;
}
