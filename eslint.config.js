// ESLint flat config: TypeScript rules everywhere, plus the layer rules of docs "structure" for src/.
//
// Layers (a request flows one way: http -> resources -> core/store; background: scheduler -> services -> store):
//   core/      never imports resources/, http/, cli/, app.ts, serve.ts, main.ts, sim/
//   sim/       never imports resources/, http/
//   resources/ never imports http/, cli/, app.ts, serve.ts, main.ts, notify/, sim/ (it asks `services.sim`)
//   notify/    never imports http/, cli/, app.ts, serve.ts, main.ts (the notification domain is in
//              resources/notifications/, below the delivery machinery in notify/)
//   store/     never imports resources/, http/, sim/, admin/
//   billing/   never imports resources/, notify/, http/, admin/, registry.ts, cli/, app.ts, serve.ts, main.ts
//   admin/     never imports http/, notify/, registry.ts, cli/, app.ts, serve.ts, main.ts (the operator plane's
//              services: http/admin.ts and cli/ call them, the composition root injects the kinds)
//   config.ts  never imports http/, notify/, admin/, registry.ts, cli/, app.ts, serve.ts, main.ts, nor resources/
//              other than the library catalogue's reader (its parsers live in core/, sim/, billing/)
//   ui/        the web console (browser code, its own tsconfig): imports nothing of the server's folders, and
//              nothing of the server imports it; it talks to the server only over HTTP (the public API)
// and no runtime import cycle anywhere in src/ (type-only imports are not followed; dynamic `import()`
// are, so a cycle hidden behind `await import` is still a cycle). Dynamic imports in src/ need an
// `eslint-disable-next-line no-restricted-syntax -- why` comment where a lazy load is deliberate.
// Formatting is Prettier's job (eslint-config-prettier, last, turns off the stylistic rules).
//
// Type-aware rules (floating/misused promises) need the whole TypeScript program: about 2-3x the time of
// this lint (~15 s CPU more), so they are opt-in: `npm run lint:typed` (STRATUS_LINT_TYPED=1).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import prettier from 'eslint-config-prettier';
import { readdirSync } from 'node:fs';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const typed = process.env.STRATUS_LINT_TYPED === '1';

const NO_DYNAMIC_IMPORT = {
  selector: 'ImportExpression',
  message:
    'No dynamic import() in src/ (it hides cycles and layer breaks). For a deliberate lazy load add `// eslint-disable-next-line no-restricted-syntax -- <why>`.',
};
const NO_QUERY_BUILDING = {
  selector:
    'CallExpression[callee.property.name=/^(selectFrom|selectNoFrom|insertInto|replaceInto|updateTable|deleteFrom|mergeInto|where|innerJoin|leftJoin|orderBy|groupBy|executeTakeFirst|executeTakeFirstOrThrow)$/]',
  message: 'SQL lives in src/store/ (one module per table family): call a store method instead of building a query here.',
};

const NO_RAW_UPGRADE = {
  selector: "CallExpression[callee.property.name=/^(on|once|addListener|prependListener)$/][arguments.0.value='upgrade']",
  message:
    'Listen for upgrades through onUpgrade (src/http/raw-socket.ts): a socket node:http has let go needs an error handler and a deadline before anything else, or one reset stops the process.',
};

/** Every top-level file and folder of src/ but the console (src/ui/): the server's side of the ui zone. */
const SERVER = readdirSync(`${import.meta.dirname}/src`).filter((f) => f !== 'ui');

/** A zone of import-x/no-restricted-paths: files under `target` may not import from `from`. */
const layer = (target, from, why) => ({ target: `./src/${target}`, from: from.map((f) => `./src/${f}`), message: why });

export default defineConfig(
  { ignores: ['dist/**', 'data/**', 'outbox/**', 'node_modules/**', 'coverage/**', '.test-build/**'] },

  js.configs.recommended,
  tseslint.configs.recommended,
  importX.flatConfigs.recommended,
  importX.flatConfigs.typescript,

  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'separate-type-imports', disallowTypeAnnotations: false }],
      // TypeScript already checks these (named/default exports, unresolved modules) and faster.
      'import-x/named': 'off',
      'import-x/namespace': 'off',
      'import-x/default': 'off',
      'import-x/no-named-as-default': 'off', // `import Type from 'typebox'` is that package's documented form
      'import-x/no-named-as-default-member': 'off',
      'import-x/no-unresolved': 'off',
      'import-x/no-duplicates': 'error', // `import type { A }` beside `import { b }` of one module is fine
    },
  },

  // A migration sees the schema as it was then, not today's types: Kysely documents `Kysely<any>` there.
  { files: ['src/store/migrations/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },

  // Tests read JSON answers as `any`; that is what they are.
  { files: ['test/**/*.ts', 'bench/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },

  // Opt-in type-aware promise rules (see the header).
  ...(typed
    ? [
        {
          files: ['**/*.ts'],
          languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
          rules: {
            '@typescript-eslint/no-floating-promises': [
              'error',
              {
                allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }],
              },
            ],
            '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
            '@typescript-eslint/await-thenable': 'error',
          },
        },
      ]
    : []),
  // Plain JS (this file, bin/): Node ESM.
  { files: ['**/*.js'], languageOptions: { globals: { process: 'readonly', console: 'readonly' } } },

  // The layer rules: src/ only (test/ and bench/ may reach anywhere).
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            layer(
              'core',
              ['resources', 'notify', 'http', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'core/ is below the resource kinds and the HTTP layer: inject what it needs from the composition root.',
            ),
            layer(
              'core',
              ['sim'],
              'core/ declares the simulator (core/sim.ts) and never reaches its implementation: the composition root injects it as services.sim.',
            ),
            layer('billing', ['sim'], 'billing/ meters through the kinds, which reach the simulator as services.sim: never import sim/.'),
            layer('resources', ['sim'], 'Resource code reaches the simulated hardware only through services.sim (core/sim.ts): never import sim/.'),
            layer(
              'billing',
              ['resources', 'notify', 'http', 'admin', 'registry.ts', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'billing/ is the metering engine below the kinds: kinds declare meters, the composition root injects them.',
            ),
            layer(
              'admin',
              ['http', 'notify', 'registry.ts', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'admin/ is the operator plane below its front ends (http/admin.ts, cli/): it takes plain data, and the composition root injects the kinds.',
            ),
            layer(
              'config.ts',
              ['http', 'notify', 'admin', 'registry.ts', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'config.ts reads settings with the parsers of the layers below (core/, sim/, billing/): move a parser down rather than reach up for it.',
            ),
            {
              ...layer(
                'config.ts',
                ['resources'],
                'config.ts reads settings with the parsers of the layers below (core/, sim/, billing/), not the kinds: move a parser down rather than reach up for it.',
              ),
              // The library catalogue is checked against the library drive's declared fields when the configuration loads.
              except: ['./libdrives/catalogue.ts'],
            },
            layer(
              'ui',
              SERVER,
              'src/ui/ is the web console, code for the browser: it reaches the server only over HTTP (src/ui/api.ts), never by importing server code.',
            ),
            ...SERVER.map((f) =>
              layer(f, ['ui'], 'The server never imports the web console (src/ui/): it serves its build (dist/ui/) as files (http/console.ts).'),
            ),
            layer('sim', ['resources', 'notify', 'http'], 'sim/ is the simulator boundary: it never imports resource kinds or HTTP.'),
            layer(
              'resources',
              ['http', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'Domain logic never touches HTTP: resources/ returns data or throws typed errors.',
            ),
            layer(
              'resources',
              ['notify'],
              'The notification domain (resources/notifications/: types, contacts, preferences, webhooks, fan-out, the delivery queue) is below its delivery machinery (notify/: worker, mailer, webhook sender): inject a port (notifications/mail.ts) instead.',
            ),
            layer(
              'notify',
              ['http', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
              'notify/ delivers what the domain decided (worker, mailer, webhook sender, the live audience): the composition root and http/ use it, never the other way.',
            ),
            layer(
              'store',
              ['resources', 'notify', 'http', 'sim', 'admin'],
              'store/ is the bottom layer: it knows no kinds, HTTP, simulator or operator plane.',
            ),
            {
              ...layer(
                'store',
                ['core', 'billing', 'config.ts', 'registry.ts', 'cli', 'app.ts', 'serve.ts', 'main.ts'],
                'store/ is the bottom layer: of core/ it uses only the leaf modules that import nothing of the project (errors, clock, order, lazy); core/ builds on the store, not the other way.',
              ),
              except: ['./errors.ts', './clock.ts', './order.ts', './lazy.ts'],
            },
            {
              target: ['./src/core/errors.ts', './src/core/clock.ts', './src/core/order.ts', './src/core/lazy.ts'],
              from: ['./src'],
              except: ['./core/errors.ts', './core/clock.ts', './core/order.ts', './core/lazy.ts'],
              message: 'The leaf modules of core/ that the store uses import nothing of the project (else store/ would sit above them).',
            },
          ],
        },
      ],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT, NO_RAW_UPGRADE],
    },
  },

  // The query rule: SQL lives in src/store/, one module per table family; no other file imports kysely or
  // builds a query (no exceptions).
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'kysely', message: 'SQL lives in src/store/ (one module per table family); import its types from there.' }] },
      ],
      'no-restricted-syntax': ['error', NO_DYNAMIC_IMPORT, NO_QUERY_BUILDING, NO_RAW_UPGRADE],
    },
  },

  prettier,
);
