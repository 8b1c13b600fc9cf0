import type { ResourceDecl } from './resource.js';
import { tags } from '../resources/tags/tags.js';
import { profile } from '../resources/profile/profile.js';
import { capabilities } from '../resources/capabilities/capabilities.js';
import { acls } from '../resources/acls/acls.js';
import { drives } from '../resources/drives/drives.js';
import { jobs } from '../resources/jobs/jobs.js';

/** Every resource kind the API serves. Adding a kind is adding its declaration here. */
export const registry: ResourceDecl[] = [acls, drives, jobs, tags, profile, capabilities];
