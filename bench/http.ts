/** One plain node:http request: no Accept-Encoding is sent (as with autocannon), so bytes are as served. */
import http from 'node:http';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export function request(url: string, headers: Record<string, string>, method = 'GET', body?: unknown): Promise<Reply> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const all = text === undefined ? headers : { ...headers, 'content-type': 'application/json' };
  return new Promise((resolve, reject) => {
    // No keep-alive (`agent: false`): a connection left open would look like a request still queued (children.ts drain).
    const req = http.request(url, { method, headers: all, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** A request that must answer 2xx; its JSON body. */
export async function call<T = Record<string, unknown>>(url: string, headers: Record<string, string>, method = 'GET', body?: unknown): Promise<T> {
  const r = await request(url, headers, method, body);
  if (r.status < 200 || r.status > 299) throw new Error(`${method} ${url} answered ${r.status}: ${r.body.toString('utf8').slice(0, 500)}`);
  return (r.body.length ? JSON.parse(r.body.toString('utf8')) : {}) as T;
}

export const basicAuth = (email: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` });
