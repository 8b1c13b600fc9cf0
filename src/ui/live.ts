import { useEffect, useRef } from 'preact/hooks';
import { ApiError, accountAction, PREFIX } from './api.js';

/**
 * Live updates from the API's event stream (src/http/event-stream.ts): one websocket for the whole page,
 * opened after `accounts/action/?do=authenticate_asynchronous` (a cookie good for 120 s), giving one JSON
 * frame `{resource_type, resource_uri, uuid}` per committed change of the account's objects (servers,
 * drives, snapshots, …, and `balance`). Pages subscribe to the kinds they show and re-read what changed,
 * so an idle console makes no request at all (the API limits GETs to 100 a minute): no polling.
 *
 * A socket that drops is reopened with a fresh cookie after a backoff (1 s doubling to 30 s); a close with
 * 1008 means the session ended (logout, new password): the page is told through `onEnded`.
 */
export interface LiveEvent {
  resource_type: string;
  resource_uri?: string;
  uuid?: string;
}

type Listener = (e: LiveEvent) => void;

const listeners = new Set<Listener>();
const stateListeners = new Set<(s: LiveState) => void>();
export type LiveState = 'off' | 'connecting' | 'live' | 'retrying';
let state: LiveState = 'off';
let socket: WebSocket | null = null;
let wanted = false;
let backoffMs = 1000;
let retry: ReturnType<typeof setTimeout> | null = null;
let endedHandler: (() => void) | null = null;

function setState(s: LiveState): void {
  state = s;
  for (const fn of stateListeners) fn(s);
}

export const liveState = (): LiveState => state;
export function onLiveState(fn: (s: LiveState) => void): () => void {
  stateListeners.add(fn);
  return () => stateListeners.delete(fn);
}

/** Every event of the stream; returns the unsubscribe function. */
export function subscribe(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function socketUrl(): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${PREFIX}websocket`;
}

async function open(): Promise<void> {
  if (!wanted || socket) return;
  setState('connecting');
  try {
    await accountAction('authenticate_asynchronous');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setState('off');
      endedHandler?.();
      return;
    }
    return scheduleRetry();
  }
  if (!wanted) return setState('off');
  const ws = new WebSocket(socketUrl());
  socket = ws;
  ws.onopen = () => {
    backoffMs = 1000;
    setState('live');
  };
  ws.onmessage = (m) => {
    let e: LiveEvent;
    try {
      e = JSON.parse(String(m.data)) as LiveEvent;
    } catch {
      return;
    }
    for (const fn of listeners) fn(e);
  };
  ws.onclose = (c) => {
    socket = null;
    if (!wanted) return setState('off');
    if (c.code === 1008) {
      setState('off');
      endedHandler?.();
      return;
    }
    scheduleRetry();
  };
}

function scheduleRetry(): void {
  setState('retrying');
  if (retry) clearTimeout(retry);
  retry = setTimeout(() => {
    retry = null;
    void open();
  }, backoffMs);
  backoffMs = Math.min(backoffMs * 2, 30_000);
}

/** Opens the stream (after sign-in); `ended` runs when the server ends the session. */
export function startLive(ended: () => void): void {
  endedHandler = ended;
  wanted = true;
  void open();
}

/** Closes the stream (sign-out). */
export function stopLive(): void {
  wanted = false;
  if (retry) clearTimeout(retry);
  retry = null;
  socket?.close(1000, 'signed out');
  socket = null;
  setState('off');
}

/**
 * Runs `refresh` when an event matches `match`, at most once per `quietMs` (several changes of one action
 * arrive together: a server start changes the server and its drives): a page re-reads once.
 */
export function useLive(match: (e: LiveEvent) => boolean, refresh: () => void, quietMs = 400): void {
  const ref = useRef({ match, refresh });
  ref.current = { match, refresh };
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const off = subscribe((e) => {
      if (!ref.current.match(e) || timer) return;
      timer = setTimeout(() => {
        timer = null;
        ref.current.refresh();
      }, quietMs);
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
  }, [quietMs]);
}
