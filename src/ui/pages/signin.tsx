import { useState } from 'preact/hooks';
import { accountAction } from '../api.js';
import { ErrorBox } from '../parts/errors.js';
import form from '../parts/form.module.css';
import { href, navigate } from '../router.js';
import { useSession } from '../session.js';
import css from './signin.module.css';

/** Runs an API call for a form: `busy` while it runs, `error` when it was refused (as the API said). */
export function useSubmit<T>(run: () => Promise<T>, done?: (t: T) => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e?: Event) => {
    e?.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const t = await run();
      setBusy(false);
      done?.(t);
    } catch (err) {
      setBusy(false);
      setError(err);
    }
  };
  return { busy, error, submit };
}

/** Sign-in with the account's e-mail and password: the API's cookie session (`accounts/action/?do=login`). */
export function SignIn() {
  const session = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit(
    () => accountAction<{ uuid: string }>('login', { username: email, password }),
    (r) => {
      session.signedIn(r.uuid);
      navigate('');
    },
  );
  return (
    <section class={css.card} aria-labelledby="signin-title">
      <h1 id="signin-title">Sign in</h1>
      <form class={form.form} onSubmit={submit}>
        <label>
          E-mail
          <input type="email" name="username" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input
            type="password"
            name="password"
            autocomplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <ErrorBox error={error} />
        <div class={form.buttons}>
          <button type="submit" class={form.primary} disabled={busy}>
            Sign in
          </button>
        </div>
      </form>
      <p>
        <a href={href('signup')}>Create an account</a> · <a href={href('reset')}>Forgot your password?</a>
      </p>
    </section>
  );
}

/** Sign-up (`do=create`): the API e-mails a link to choose the password (its own confirmation page). */
export function SignUp() {
  const [email, setEmail] = useState('');
  const [promo, setPromo] = useState('');
  const [sent, setSent] = useState(false);
  const { busy, error, submit } = useSubmit(
    () => accountAction('create', { email, promo: promo || null }),
    () => setSent(true),
  );
  return (
    <section class={css.card} aria-labelledby="signup-title">
      <h1 id="signup-title">Create an account</h1>
      {sent ? (
        <p role="status">We sent a link to {email}: open it to choose your password, then sign in.</p>
      ) : (
        <form class={form.form} onSubmit={submit}>
          <label>
            E-mail
            <input type="email" name="email" autocomplete="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          </label>
          <label>
            Promo code (optional)
            <input type="text" name="promo" value={promo} onInput={(e) => setPromo(e.currentTarget.value)} />
          </label>
          <ErrorBox error={error} />
          <div class={form.buttons}>
            <button type="submit" class={form.primary} disabled={busy}>
              Sign up
            </button>
          </div>
        </form>
      )}
      <p>
        <a href={href('signin')}>Back to sign-in</a>
      </p>
    </section>
  );
}

/** Password reset (`do=reset_password`): the API e-mails a one-time link; it always answers success. */
export function ResetPassword() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState(false);
  const { busy, error, submit } = useSubmit(
    () => accountAction('reset_password', { email }),
    () => setSent(true),
  );
  return (
    <section class={css.card} aria-labelledby="reset-title">
      <h1 id="reset-title">Reset your password</h1>
      {sent ? (
        <p role="status">If {email} has an account, a link to choose a new password is on its way.</p>
      ) : (
        <form class={form.form} onSubmit={submit}>
          <label>
            E-mail
            <input type="email" name="email" autocomplete="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          </label>
          <ErrorBox error={error} />
          <div class={form.buttons}>
            <button type="submit" class={form.primary} disabled={busy}>
              Send reset link
            </button>
          </div>
        </form>
      )}
      <p>
        <a href={href('signin')}>Back to sign-in</a>
      </p>
    </section>
  );
}
