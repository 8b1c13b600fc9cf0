import type { Services } from '../../core/context.js';
import { validation } from '../../core/errors.js';

/**
 * Drive states in which the simulated storage is busy with the drive (no resize, clone or second operation).
 * `uploading`: an upload has begun and not every byte has arrived (resources/drives/data.ts).
 */
export const BUSY = new Set(['creating', 'cloning_dst', 'resizing', 'uploading']);

/** The backend allocates in 16 KiB units: sizes are rounded up (a recorded clone shows it). */
export const roundSize = (size: number) => Math.ceil(size / 16384) * 16384;

export interface SizeLimits {
  min: number;
  max: number;
}

/** Storage types this location offers and their size limits, from the capabilities in config. */
function storageLimits(s: Pick<Services, 'config'>, type: string): SizeLimits | undefined {
  const drives = (s.config.capabilities.drives ?? {}) as Record<string, { size?: SizeLimits; min_size?: number; max_size?: number }>;
  const t = drives[type];
  if (!t) return undefined;
  return { min: t.size?.min ?? t.min_size ?? 0, max: t.size?.max ?? t.max_size ?? Number.MAX_SAFE_INTEGER };
}

export function defaultStorageType(s: Pick<Services, 'config'>): string {
  const caps = s.config.capabilities as { default_storage_type?: string; drives?: Record<string, unknown> };
  return caps.default_storage_type ?? (caps.drives && 'dssd' in caps.drives ? 'dssd' : (Object.keys(caps.drives ?? {})[0] ?? 'dssd'));
}

export function checkStorage(s: Pick<Services, 'config'>, type: string): SizeLimits {
  const limits = storageLimits(s, type);
  if (!limits)
    throw validation('storage_type', `Storage type ${type} is not offered here; offered: ${Object.keys(s.config.capabilities.drives ?? {}).join(', ')}`);
  return limits;
}

export function checkSize(limits: SizeLimits, size: number, atLeast = 0): number {
  const rounded = roundSize(size);
  if (rounded < limits.min || rounded > limits.max) throw validation('size', `Size must be between ${limits.min} and ${limits.max} bytes`);
  if (rounded < atLeast) throw validation('size', `Size cannot be smaller than the current ${atLeast} bytes`);
  return rounded;
}
