import { Readable } from 'node:stream';
import type { Ctx, Services } from '../core/context.js';
import { ApiError, validation } from '../core/errors.js';
import { createItems, type Obj } from '../core/input.js';
import { drives } from '../resources/drives/drives.js';
import { alreadyUploaded, chunkPlace, checkChunkLink, hasChunk, lockForUpload, receiveChunk, type ChunkPlace } from '../resources/drives/data.js';
import { initUpload, plainUpload, shownDrive } from '../resources/drives/upload.js';
import { boundaryOf, multipartParts, partText, type Part } from './multipart.js';
import { API_BASE } from './resource-routes.js';
import type { ApiRequest, PathSpec } from './routes.js';
import type { Result } from './respond.js';

/**
 * The drive data protocols (pycloudsigma's `upload_client.py`, `resumable_upload.py` and its upload/download
 * acceptance test; decisions in docs/api.md "Drive data"):
 * - `POST drives/upload/[name]`, the image as an `application/octet-stream` body: a new drive of exactly
 *   that many bytes; answers its uuid as text.
 * - `POST initupload/` `{name, size, media}` (bare or as `{objects: [...]}`) makes an `uploading` drive; `drives/<uuid>/action/?do=upload_chunk`
 *   answers a signed `link` per chunk (416 when it arrived), and the chunk is POSTed there as octet-stream.
 * - `GET|POST drives/<uuid>/upload/` is resumable.js: GET answers 200 when the chunk the query names has
 *   arrived (404 when not), POST stores the chunk from a multipart body (`file` part).
 * - `GET drives/<uuid>/download/` streams the drive's bytes, with `Range` (206, or 416 out of bounds).
 * Bodies are streams (`rawBody`), written in batches as they arrive and never held whole: a plain upload, a
 * chunk sent to its link, and a resumable chunk's `file` part (its multipart body is read as it arrives, up to
 * the chunk's largest size and no further).
 */
const octets = { contentType: 'application/octet-stream' };
const uploadFields = { name: { type: 'string' }, size: { type: ['integer', 'string'] }, media: { type: 'string' } };
/** The largest resumable chunk (the fields that place it come in its body, so its size is known late). */
const MAX_CHUNK = 256 * 1024 * 1024;
/** Room for a multipart body's fields and boundaries beside its chunk. */
const MULTIPART_OVERHEAD = 64 * 1024;

const lastValue = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[v.length - 1] : v);

function ctxOf(s: Services, req: ApiRequest): Ctx {
  return { ...s, caller: req.caller };
}

/** The declared body length (400 without one: the bounds are checked before any work). */
function contentLength(req: ApiRequest): number {
  const raw = req.http.headers['content-length'];
  if (raw === undefined || !/^\d+$/.test(raw)) throw validation('Content-Length', 'The upload needs a Content-Length (the image size)');
  return Number(raw);
}

const bodyStream = (req: ApiRequest): AsyncIterable<Buffer> => {
  if (req.body instanceof Readable) return req.body;
  throw validation(null, 'The request has no body');
};

/** The body as it arrives, up to `limit` bytes (413 past it, or at once when its declared length is): a chunk's multipart body. */
function bounded(req: ApiRequest, limit: number): AsyncIterable<Buffer> {
  const tooLarge = () => new ApiError('toolarge', `The body is larger than the ${limit} bytes this chunk may take`);
  const declared = req.http.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) throw tooLarge();
  const body = bodyStream(req);
  return (async function* () {
    let n = 0;
    for await (const piece of body) {
      n += piece.length;
      if (n > limit) throw tooLarge();
      yield piece;
    }
  })();
}

/** A drive the caller may `perm`, with its size (404 unseen, 403 not permitted). */
async function driveFor(ctx: Ctx, uuid: string, perm: 'EDIT' | 'CLONE'): Promise<{ uuid: string; size: number; owner: string | null }> {
  const row = await drives.service.authorize(ctx, uuid, perm);
  if (row.owner_uuid === null) throw new ApiError('permission', 'A library drive has no data to read or write here; clone it first');
  return { uuid, size: Number(row.body.size), owner: row.owner_uuid };
}

/**
 * `bytes=a-b`, `bytes=a-`, `bytes=-n` against a size: the range, null for the whole, 416 when it lies outside (or
 * ends before it starts). As RFC 9110 §14.2 has it, the unit's name is case-insensitive, and a Range in another
 * unit or that does not parse is ignored (the whole body, 200), as are several ranges (it allows that too).
 */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null {
  if (!header) return null;
  const eq = header.indexOf('=');
  if (eq < 0 || header.slice(0, eq).trim().toLowerCase() !== 'bytes') return null;
  const m = /^(\d*)-(\d*)$/.exec(header.slice(eq + 1).trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  const outside = () => new ApiError('range', `Range ${header} is outside the drive's ${size} bytes`, 'Range', { 'Content-Range': `bytes */${size}` });
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0 || size === 0) throw outside();
    return { start: Math.max(0, size - n), end: size };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size : Math.min(size, Number(m[2]) + 1);
  if (start >= size || end <= start) throw outside();
  return { start, end };
}

/** The resumable.js fields of a request (query or multipart), and the chunk they name. */
function resumablePlace(fields: Record<string, string | undefined>, size: number): { place: ChunkPlace; number: number } {
  const num = (name: string) => {
    const v = fields[name];
    if (v === undefined) throw validation(name, `${name} is required (in the query, or as a field before the file part)`);
    if (!/^\d+$/.test(v)) throw validation(name, `${name} must be a non-negative integer`);
    return Number(v);
  };
  const total = num('resumableTotalSize');
  if (total !== size) throw validation('resumableTotalSize', `The drive is ${size} bytes, not ${total}`);
  const number = num('resumableChunkNumber');
  if (number < 1) throw validation('resumableChunkNumber', 'resumable.js counts chunks from 1');
  return { place: chunkPlace(size, num('resumableChunkSize'), number - 1, 'resumableChunkNumber'), number };
}

/** The fields that place a chunk: given again after its file part, they must say the same. */
const PLACING = new Set(['resumableChunkNumber', 'resumableChunkSize', 'resumableTotalSize']);

/**
 * A resumable chunk's bytes (its file part), checked against its place as they arrive; then the rest of the
 * body is read before the iteration ends, so the chunk counts (its last batch commits) only once the body is
 * whole: no second file part, no placing field that says otherwise, the closing boundary there.
 */
async function* chunkBytes(
  file: Part,
  place: ChunkPlace,
  number: number,
  fields: Record<string, string | undefined>,
  rest: AsyncIterator<Part>,
): AsyncGenerator<Buffer> {
  let n = 0;
  for await (const piece of file.data) {
    n += piece.length;
    if (n > place.size) throw validation('file', `Chunk ${number} must be ${place.size} bytes, not more`);
    yield piece;
  }
  if (n !== place.size) throw validation('file', `Chunk ${number} must be ${place.size} bytes, not ${n}`);
  for (let next = await rest.next(); !next.done; next = await rest.next()) {
    const { name } = next.value;
    if (name === 'file') throw validation('file', 'The multipart body has more than one file part');
    const value = await partText(next.value);
    if (PLACING.has(name) && value !== fields[name]) throw validation(name, `${name} is given twice, with different values`);
  }
}

/**
 * The declaration of an upload: one object, bare or in the envelope every create takes (`{objects: [...]}`, what
 * pycloudsigma's InitUpload.create sends, or a list). An upload makes one drive: several objects are a 400.
 */
function uploadDecl(body: unknown): Obj {
  if (body === undefined || body === null) return {};
  const items = createItems(body);
  if (items.length > 1) throw validation('objects', `An upload begins one drive: send one object, not ${items.length}`);
  return items[0];
}

export function driveDataPaths(s: Services): PathSpec[] {
  const upload: PathSpec['methods']['POST'] = async (req) => {
    const ctx = ctxOf(s, req);
    const length = contentLength(req);
    const media = lastValue(req.query.media);
    const name = req.params.name ? decodeURIComponent(req.params.name) : lastValue(req.query.name);
    const uuid = await plainUpload(ctx, { name, media, size: length, storage_type: lastValue(req.query.storage_type) }, length, bodyStream(req));
    return { status: 201, raw: { contentType: 'text/plain; charset=utf-8', payload: uuid }, headers: { Location: `${req.origin}${API_BASE}drives/${uuid}/` } };
  };
  const uploadDoc = {
    summary: 'Upload a drive image (the body): a new drive of its size; answers its uuid',
    responses: { 201: { contentType: 'text/plain' } },
  };

  return [
    {
      url: `${API_BASE}initupload/`,
      methods: {
        POST: async (req) => {
          const ctx = ctxOf(s, req);
          const uuid = await initUpload(ctx, uploadDecl(req.body));
          return { status: 201, body: { objects: [await shownDrive(ctx, uuid)] }, headers: { Location: `${req.origin}${API_BASE}drives/${uuid}/` } };
        },
      },
      doc: {
        POST: {
          summary: 'Begin a chunked or resumable upload: an uploading drive of the image size',
          // One object, bare or as the one item of `objects`.
          body: {
            type: 'object',
            properties: { ...uploadFields, objects: { type: 'array', minItems: 1, maxItems: 1, items: { type: 'object', properties: uploadFields } } },
          },
          responses: { 201: { type: 'object', required: ['objects'], properties: { objects: { type: 'array' } } } },
        },
      },
    },
    { url: `${API_BASE}drives/upload/`, rawBody: true, methods: { POST: upload }, doc: { POST: uploadDoc } },
    { url: `${API_BASE}drives/upload/:name/`, rawBody: true, methods: { POST: upload }, doc: { POST: uploadDoc } },
    {
      url: `${API_BASE}drives/:uuid/download/`,
      rawBody: true,
      methods: {
        GET: async (req): Promise<Result> => {
          const ctx = ctxOf(s, req);
          const drive = await driveFor(ctx, req.params.uuid, 'CLONE');
          const range = parseRange(req.http.headers.range as string | undefined, drive.size);
          const { start, end } = range ?? { start: 0, end: drive.size };
          const headers: Record<string, string> = {
            'Content-Length': String(end - start),
            'Content-Disposition': `attachment; filename="${drive.uuid}"`,
            'Accept-Ranges': 'bytes',
          };
          if (range) headers['Content-Range'] = `bytes ${start}-${end - 1}/${drive.size}`;
          const payload = req.http.method === 'HEAD' ? '' : Readable.from(s.sim.storage.readData(s.store.db, drive, start, end), { objectMode: false });
          return { status: range ? 206 : 200, headers, raw: { ...octets, payload } };
        },
      },
      doc: { GET: { summary: "The drive's bytes (Range: 206; unwritten bytes are zeroes)", responses: { 200: octets, 206: octets } } },
    },
    {
      url: `${API_BASE}drives/:uuid/upload/`,
      rawBody: true,
      methods: {
        GET: async (req) => {
          const ctx = ctxOf(s, req);
          const drive = await driveFor(ctx, req.params.uuid, 'EDIT');
          const fields = Object.fromEntries(Object.keys(req.query).map((k) => [k, lastValue(req.query[k])]));
          const { place, number } = resumablePlace(fields, drive.size);
          if (!(await hasChunk(ctx, drive.uuid, place))) throw new ApiError('notexist', `Chunk ${number} of drive ${drive.uuid} has not arrived`);
          return { status: 200, body: { chunk: number, arrived: true } };
        },
        POST: async (req) => {
          const ctx = ctxOf(s, req);
          const drive = await driveFor(ctx, req.params.uuid, 'EDIT');
          const boundary = boundaryOf(req.http.headers['content-type']);
          const fields: Record<string, string | undefined> = Object.fromEntries(Object.keys(req.query).map((k) => [k, lastValue(req.query[k])]));
          // The chunk's fields come in the body: until they are read, a chunk may be as large as the drive, up to MAX_CHUNK.
          const parts = multipartParts(bounded(req, Math.min(drive.size, MAX_CHUNK) + MULTIPART_OVERHEAD), boundary);
          // resumable.js sends its fields before the file: the chunk is placed when its bytes begin, and written as they arrive.
          let file: Part | undefined;
          for (let next = await parts.next(); !next.done; next = await parts.next()) {
            if (next.value.name === 'file') {
              file = next.value;
              break;
            }
            fields[next.value.name] = await partText(next.value);
          }
          if (!file) throw validation('file', 'The multipart body has no file part');
          const { place, number } = resumablePlace(fields, drive.size);
          await receiveChunk(ctx, drive.uuid, place, chunkBytes(file, place, number, fields, parts));
          return { status: 200, body: { chunk: number, arrived: true } };
        },
      },
      doc: {
        GET: { summary: 'resumable.js: 200 when the chunk the query names has arrived (404 otherwise)', responses: { 200: { type: 'object' } } },
        POST: { summary: 'resumable.js: one chunk, multipart with a file part', responses: { 200: { type: 'object' } } },
      },
    },
    {
      url: `${API_BASE}drives/:uuid/upload_chunk/`,
      rawBody: true,
      // The link is its own credential (signed, valid 5 minutes): the chunked client sends none.
      public: true,
      methods: {
        POST: async (req) => {
          const uuid = req.params.uuid;
          const link = await checkChunkLink(s, uuid, {
            chunk_number: lastValue(req.query.chunk_number),
            chunk_size: lastValue(req.query.chunk_size),
            expires: lastValue(req.query.expires),
            signature: lastValue(req.query.signature),
          });
          const row = await s.store.transaction((tx) => lockForUpload(tx, s, uuid));
          // The link acts for the drive's owner (who, or whose grantee with EDIT, asked for it).
          const ctx: Ctx = { ...s, caller: { uuid: row.owner_uuid ?? '', email: '', state: 'active' } };
          const place = chunkPlace(Number(row.body.size), link.chunkSize, link.number);
          // A chunk is written once through its link, as upload_chunk answers 416 for it once it has arrived.
          if (await hasChunk(ctx, uuid, place)) throw alreadyUploaded(link.number);
          const length = contentLength(req);
          if (length !== place.size) throw validation('Content-Length', `Chunk ${link.number} must be ${place.size} bytes, not ${length}`);
          await receiveChunk(ctx, uuid, place, bodyStream(req), { number: link.number });
          return { status: 200, body: { chunk: link.number, arrived: true } };
        },
      },
      doc: { POST: { summary: 'The chunked upload: one chunk, to the link upload_chunk answered', responses: { 200: { type: 'object' } } } },
    },
  ];
}
