/**
 * The `stratus` process: every command is src/cli/index.ts (`runCli`), which also parses the arguments for
 * `serve`; `serve` itself (src/serve.ts: the API server, signals, the scheduler loop) is loaded only for
 * that command. (No top-level await: the build compiles this into a CommonJS script, scripts/build.js.)
 */
import { runCli } from './cli/index.js';

void runCli(
  process.argv.slice(2),
  { out: (s) => void process.stdout.write(s), err: (s) => void process.stderr.write(s), errIsTTY: process.stderr.isTTY === true },
  {
    serve: async (config) => {
      // eslint-disable-next-line no-restricted-syntax -- the HTTP server (fastify and its plugins, about half of the code) runs only for `serve`: operator commands start without it
      const { serve } = await import('./serve.js');
      return serve(config);
    },
  },
).then((code) => {
  if (code !== 0) process.exit(code);
});
