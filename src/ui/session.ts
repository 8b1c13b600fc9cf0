import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

/** Who is signed in (the account's uuid), and how to change it; the shell provides it to every page. */
export interface Session {
  me: string | null;
  /** After a sign-in: the account's uuid. */
  signedIn(uuid: string): void;
  /** Signs out through the API (logout ends the session and clears its cookies). */
  signOut(): Promise<void>;
}

export const SessionContext = createContext<Session>({ me: null, signedIn: () => undefined, signOut: async () => undefined });
export const useSession = (): Session => useContext(SessionContext);
