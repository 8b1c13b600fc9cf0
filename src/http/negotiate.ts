import { ApiError } from '../core/errors.js';

export type Format = 'json' | 'xml';

const JSON_TYPES = new Set(['application/json']);
const XML_TYPES = new Set(['application/xml']);
const WILDCARDS = new Set(['*/*', 'application/*']);

/**
 * The response format, by the spec's rules: `?format=` wins (the last one when repeated); otherwise
 * `Accept`: JSON if listed, else XML if listed, else JSON for a wildcard, else 406. No header means JSON.
 */
export function negotiate(formatParam: string | string[] | undefined, accept: string | undefined): Format {
  if (formatParam !== undefined) {
    const last = Array.isArray(formatParam) ? formatParam[formatParam.length - 1] : formatParam;
    if (last === 'json' || last === 'xml') return last;
    throw new ApiError('validation', 'format must be json or xml', 'format');
  }
  if (accept === undefined || accept.trim() === '') return 'json';
  let json = false;
  let xml = false;
  let wildcard = false;
  for (const part of accept.split(',')) {
    const [type, ...params] = part.split(';');
    const media = type.trim().toLowerCase();
    // q=0 means "not acceptable".
    if (params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(p))) continue;
    if (JSON_TYPES.has(media)) json = true;
    else if (XML_TYPES.has(media)) xml = true;
    else if (WILDCARDS.has(media)) wildcard = true;
  }
  if (json) return 'json';
  if (xml) return 'xml';
  if (wildcard) return 'json';
  throw new ApiError('notacceptable', 'Accept must allow application/json, application/xml or */*', 'Accept');
}
