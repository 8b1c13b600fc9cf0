import type { ResourceDecl } from './resource.js';
import { tags } from '../resources/tags/tags.js';
import { profile } from '../resources/profile/profile.js';
import { capabilities } from '../resources/capabilities/capabilities.js';
import { acls } from '../resources/acls/acls.js';
import { drives } from '../resources/drives/drives.js';
import { jobs } from '../resources/jobs/jobs.js';
import { libdrives } from '../resources/libdrives/libdrives.js';
import { servers } from '../resources/servers/servers.js';
import { ips } from '../resources/ips/ips.js';
import { vlans } from '../resources/vlans/vlans.js';
import { logs } from '../resources/logs/logs.js';
import { keypairs, pubkeys } from '../resources/keypairs/keypairs.js';

/** Every resource kind the API serves. Adding a kind is adding its declaration here. */
export const registry: ResourceDecl[] = [acls, drives, jobs, libdrives, servers, ips, vlans, logs, keypairs, pubkeys, tags, profile, capabilities];
