import type { Services } from '../../core/context.js';
import type { Obj } from '../../core/input.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import type { Attachment } from './attachments.js';

/**
 * Keep drives' `mounted_on` and `mounted`/`unmounted` status in step with a server's attachments. Each
 * drive is changed under its row lock (the server's is held by the caller: servers before drives).
 */
export async function syncMounts(tx: Tx, s: Pick<Services, 'clock' | 'store'>, server: string, before: string[], after: string[]): Promise<void> {
  const now = s.clock.now();
  for (const uuid of before.filter((d) => !after.includes(d)))
    await s.store.resources.patch(tx, now, 'drives', uuid, (b) => {
      const mounted_on = ((b.mounted_on as { uuid: string }[]) ?? []).filter((m) => m.uuid !== server);
      return { ...b, mounted_on, status: b.status === 'mounted' && !mounted_on.length ? 'unmounted' : b.status };
    });
  for (const uuid of after.filter((d) => !before.includes(d)))
    await s.store.resources.patch(tx, now, 'drives', uuid, (b) => {
      const mounted_on = [...((b.mounted_on as { uuid: string }[]) ?? []).filter((m) => m.uuid !== server), ref('servers', server)];
      return { ...b, mounted_on, status: b.status === 'unmounted' ? 'mounted' : b.status };
    });
}

export const attachedDrives = (body: Obj) => ((body.drives as Attachment[] | undefined) ?? []).map((a) => a.drive);
