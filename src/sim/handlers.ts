import type { TimerHandler } from './scheduler.js';
import { driveTimers } from '../resources/drives/drives.js';
import { jobTimers } from '../resources/jobs/jobs.js';
import { serverTimers } from '../resources/servers/lifecycle.js';

/** Every kind of durable follow-up work and what runs it. */
export const timerHandlers: Record<string, TimerHandler> = { ...driveTimers, ...jobTimers, ...serverTimers };
