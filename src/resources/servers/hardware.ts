import type { Services } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';

interface Range {
  min: number;
  max: number;
}
interface HostLimits {
  cpu?: Range;
  cpu_per_smp?: Range;
  mem?: Range;
  smp?: Range;
}

/**
 * The core count a server gets when it names none: the fewest cores that keep cpu per core within the
 * host's range (libcloud asks for 2000 MHz per requested core without sending smp).
 */
export function defaultSmp(s: Services, server: Obj): number {
  const caps = s.config.capabilities as { hosts?: Record<string, HostLimits> };
  const max = caps.hosts?.[server.cpu_type as string]?.cpu_per_smp?.max;
  return max ? Math.max(1, Math.ceil((server.cpu as number) / max)) : 1;
}

/**
 * Server sizing against the location's capabilities (reference §5.3): the (hypervisor, cpu_type) pair
 * must be offered, and cpu, mem, smp and cpu per core must lie in the host type's ranges.
 */
export function checkHardware(s: Services, server: Obj): void {
  const caps = s.config.capabilities as { hypervisors?: Record<string, string[]>; hosts?: Record<string, HostLimits> };
  const hypervisor = server.hypervisor as string;
  const cpuType = server.cpu_type as string;
  const offered = caps.hypervisors?.[hypervisor];
  if (!offered) throw validation('hypervisor', `Hypervisor ${hypervisor} is not offered here; offered: ${Object.keys(caps.hypervisors ?? {}).join(', ')}`);
  if (!offered.includes(cpuType))
    throw validation('cpu_type', `CPU type ${cpuType} is not available with hypervisor ${hypervisor}; available: ${offered.join(', ')}`);
  const host = caps.hosts?.[cpuType] ?? {};
  const within = (field: 'cpu' | 'mem' | 'smp', value: number) => {
    const r = host[field];
    if (r && (value < r.min || value > r.max)) throw validation(field, `${field} must be between ${r.min} and ${r.max}`);
  };
  within('cpu', server.cpu as number);
  within('mem', server.mem as number);
  within('smp', server.smp as number);
  const perCore = host.cpu_per_smp;
  const per = (server.cpu as number) / (server.smp as number);
  if (perCore && (per < perCore.min || per > perCore.max))
    throw validation('cpu', `cpu per core (cpu/smp = ${Math.round(per)}) must be between ${perCore.min} and ${perCore.max}`);
}
