import type { EmailContent } from './deliveries.js';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const linkify = (escaped: string) => escaped.replace(/https?:\/\/[^\s<]+/g, (u) => `<a href="${u}">${u}</a>`);

/**
 * A notification as an e-mail a person reads: the subject, the event's own words (`details`), when it
 * happened, and why the reader gets it; as plain text and as simple HTML with the same content.
 */
export function renderEmail(n: { subject: string; details: string; type: string; at: string; account: string }): EmailContent {
  const paragraphs = [
    'Hello,',
    n.details || n.subject + '.',
    `When: ${n.at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}`,
    `You receive this because the notification preferences of the Stratus account ${n.account} send "${n.type}" notifications to this address. ` +
      'Change them with PUT /api/2.0/notification_preferences/.',
  ];
  const text = paragraphs.join('\n\n') + '\n';
  const html =
    '<!doctype html><html><body style="font-family: sans-serif">' +
    `<h2>${escapeHtml(n.subject)}</h2>` +
    paragraphs.map((p) => `<p>${linkify(escapeHtml(p)).replace(/\n/g, '<br>')}</p>`).join('') +
    '</body></html>';
  return { subject: n.subject, text, html };
}
