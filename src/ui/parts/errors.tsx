import { ApiError } from '../api.js';
import css from './errors.module.css';

/** An error of the API as it came: each `error_message` (with its `error_point` when it names a field). */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const list =
    error instanceof ApiError
      ? error.errors
      : [{ error_type: 'client', error_point: null, error_message: error instanceof Error ? error.message : String(error) }];
  return (
    <div role="alert" class={css.error}>
      {list.map((e, i) => (
        <p key={i}>
          {e.error_point ? <strong>{e.error_point}: </strong> : null}
          {e.error_message}
        </p>
      ))}
    </div>
  );
}
