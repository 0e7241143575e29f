// The GraphQL playground served at /playground: GraphiQL, bundled from npm by
// the demo's Vite build (no CDN), so it works offline and under a strict
// Content-Security-Policy. The server fills in the endpoint and, in
// development, the demo merchant's Authorization header (see
// playground-config.ts and web-demo/webdemo.go).
import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import './playground.css';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { GraphiQL } from 'graphiql';
import { createElement, StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { defaultQuery, headersText, readPlaygroundConfig } from './playground-config';

const config = readPlaygroundConfig(document.getElementById('playground-config')?.textContent);
const root = document.getElementById('graphiql');
if (!root) throw new Error('#graphiql is missing from playground.html');

const headers = headersText(config.headers);
createRoot(root).render(
  createElement(
    StrictMode,
    null,
    createElement(GraphiQL, {
      fetcher: createGraphiQLFetcher({ url: config.endpoint }),
      defaultQuery,
      initialHeaders: headers,
      defaultHeaders: headers,
      isHeadersEditorEnabled: true,
      defaultEditorToolsVisibility: 'headers',
    }),
  ),
);
