import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { documentPath } from '../routes.js';
import { CONFIRM_PATH, confirmSignup, MIN_PASSWORD_LENGTH, pendingSignup } from '../../resources/accounts/signup.js';

/**
 * The page a sign-up e-mail links to (`GET/POST /accounts/confirm/<token>`, outside `/api/2.0/`): GET shows
 * a form, POST (an HTML form, `application/x-www-form-urlencoded`) sets the password. Plain HTML with no
 * script; answers are HTML for every outcome, never the API's error arrays. The token sits in the URL, so
 * the page forbids caching and referrers, framing, and any resource from elsewhere.
 */
const HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)} - Stratus</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;line-height:1.5}
label{display:block;margin-top:1rem}input{width:100%;padding:.4rem;box-sizing:border-box}button{margin-top:1.2rem;padding:.5rem 1.2rem}
.error{color:#a00}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

function form(email: string, error?: string): string {
  return page(
    'Choose your password',
    `<p>Account: <strong>${escapeHtml(email)}</strong></p>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post">
<input type="hidden" name="username" autocomplete="username" value="${escapeHtml(email)}">
<label>Password (at least ${MIN_PASSWORD_LENGTH} characters)
<input type="password" name="password" required minlength="${MIN_PASSWORD_LENGTH}" autocomplete="new-password" autofocus></label>
<label>Repeat the password
<input type="password" name="password2" required minlength="${MIN_PASSWORD_LENGTH}" autocomplete="new-password"></label>
<button type="submit">Set password</button>
</form>`,
  );
}

const invalid = () =>
  page(
    'Link not valid',
    '<p>This link is not valid: it was already used, has expired (links work for 24 hours) or was mistyped.</p><p>Sign up again to get a new one.</p>',
  );

export function registerConfirmPage(app: FastifyInstance, s: Services, apiBase: () => string): Promise<void> {
  const send = (reply: FastifyReply, status: number, html: string) => reply.code(status).headers(HEADERS).send(html);

  const show = async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
    const user = await pendingSignup(s, req.params.token);
    return user ? send(reply, 200, form(user.email)) : send(reply, 404, invalid());
  };

  const submit = async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
    const { token } = req.params;
    const user = await pendingSignup(s, token);
    if (!user) return send(reply, 404, invalid());
    const fields = (req.body ?? {}) as Record<string, string>;
    try {
      const done = await confirmSignup(s, token, fields.password, fields.password2);
      return send(
        reply,
        200,
        page(
          'Password set',
          `<p>Your account <strong>${escapeHtml(done.email)}</strong> is ready.</p>
<p>Use the API at <code>${escapeHtml(apiBase())}</code> with your e-mail and this password (HTTP Basic or Digest).</p>`,
        ),
      );
    } catch (e) {
      if (e instanceof ApiError && e.type === 'validation') return send(reply, 400, form(user.email, e.message));
      if (e instanceof ApiError && e.type === 'notexist') return send(reply, 404, invalid());
      throw e;
    }
  };

  // Its own encapsulated scope: HTML forms need a urlencoded body parser the API does not accept.
  const html = { 200: { contentType: 'text/html' }, 400: { contentType: 'text/html' }, 404: { contentType: 'text/html' } } as const;
  documentPath(app, {
    url: `${CONFIRM_PATH}:token`,
    public: true,
    doc: {
      GET: { summary: 'The sign-up confirmation page (HTML)', responses: html },
      POST: { summary: 'Set the password of a new account (HTML form)', responses: html },
    },
  });
  return app.register(async (scope) => {
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      const params = new URLSearchParams(typeof body === 'string' ? body : body.toString('utf8'));
      const out: Record<string, string> = {};
      for (const [k, v] of params) if (!(k in out) && k !== '__proto__') out[k] = v;
      done(null, out);
    });
    scope.get<{ Params: { token: string } }>(`${CONFIRM_PATH}:token`, show);
    scope.post<{ Params: { token: string } }>(`${CONFIRM_PATH}:token`, submit);
  }) as unknown as Promise<void>;
}
