/**
 * The API's paths, matched segment by segment: `/api/2.0/servers/:uuid/action/` style patterns, a `:name`
 * being one whole segment. registerPath (routes.ts) keeps its ~180 paths here behind one Fastify route
 * instead of registering each with the router for every method: find-my-way compiles functions for every
 * (method, path) node, which was the largest single cost of start-up (~50 ms for ~1,250 entries), while
 * a request here costs a split and a few map lookups.
 *
 * It matches as find-my-way did with Fastify's options here: a static segment wins over a parameter (with
 * backtracking), one trailing slash is ignored, segments are %-decoded, a parameter may be empty
 * (`/servers//` is the object with uuid '': a 404 after authentication), and a parameter over
 * `maxParamLength` characters matches nothing.
 */
export interface PathMatch<T> {
  value: T;
  /** The pattern matched (the route label of metrics and logs). */
  pattern: string;
  params: Record<string, string>;
}

interface Leaf<T> {
  value: T;
  pattern: string;
  names: string[];
}

class Node<T> {
  readonly statics = new Map<string, Node<T>>();
  param: Node<T> | null = null;
  leaf: Leaf<T> | null = null;
}

/** The segments of a path: without its leading slash and one trailing slash. */
function segmentsOf(path: string): string[] {
  const start = path.charCodeAt(0) === 47 ? 1 : 0;
  const end = path.length > start && path.charCodeAt(path.length - 1) === 47 ? path.length - 1 : path.length;
  return end <= start ? [] : path.slice(start, end).split('/');
}

/** A %-escape that does not decode (a URIError) makes the whole path malformed. */
export const MALFORMED = Symbol('malformed');

export class PathTable<T> {
  private readonly root = new Node<T>();

  constructor(private readonly maxParamLength: number) {}

  add(pattern: string, value: T): void {
    let node = this.root;
    const names: string[] = [];
    for (const seg of segmentsOf(pattern)) {
      if (seg.startsWith(':')) {
        names.push(seg.slice(1));
        node = node.param ??= new Node<T>();
      } else {
        let next = node.statics.get(seg);
        if (!next) node.statics.set(seg, (next = new Node<T>()));
        node = next;
      }
    }
    if (node.leaf) throw new Error(`two routes for ${pattern} (and ${node.leaf.pattern})`);
    node.leaf = { value, pattern, names };
  }

  /** The route of a request path (no query string), undefined for none, MALFORMED for a bad %-escape. */
  match(path: string): PathMatch<T> | undefined | typeof MALFORMED {
    const raw = segmentsOf(path);
    const segs = new Array<string>(raw.length);
    for (let i = 0; i < raw.length; i++) {
      if (!raw[i].includes('%')) segs[i] = raw[i];
      else
        try {
          segs[i] = decodeURIComponent(raw[i]);
        } catch {
          return MALFORMED;
        }
    }
    const values: string[] = [];
    const leaf = this.walk(this.root, segs, 0, values);
    if (!leaf) return undefined;
    const params: Record<string, string> = {};
    for (let i = 0; i < leaf.names.length; i++) params[leaf.names[i]] = values[i];
    return { value: leaf.value, pattern: leaf.pattern, params };
  }

  private walk(node: Node<T>, segs: string[], i: number, values: string[]): Leaf<T> | null {
    if (i === segs.length) return node.leaf;
    const seg = segs[i];
    const next = node.statics.get(seg);
    if (next) {
      const found = this.walk(next, segs, i + 1, values);
      if (found) return found;
    }
    if (node.param && seg.length <= this.maxParamLength) {
      values.push(seg);
      const found = this.walk(node.param, segs, i + 1, values);
      if (found) return found;
      values.pop();
    }
    return null;
  }
}
