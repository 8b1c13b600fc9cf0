/**
 * The Stratus web console: the cloud in a browser, a client of the public API 2.0 only (api.ts) with live
 * updates from its event stream (live.ts). Served at /ui/ by src/http/console.ts from the bundle
 * scripts/build.js makes (dist/ui/). Why Preact, TSX through esbuild and CSS modules: docs/console.md.
 *
 * Layout: pages.ts (routes, navigation), kinds.ts (what each kind of object shows: the declarative table
 * the generic list and detail pages read), pages/ (the pages), parts/ (shared pieces), shell.tsx (header,
 * navigation, main region), router.ts (history routing under a run-time base).
 *
 * Accessible names the browser tests rely on (getByRole / getByLabel):
 * - sign-in: textboxes "E-mail", "Password"; button "Sign in"; links "Create an account", "Forgot your password?";
 *   sign-up: "E-mail", "Promo code (optional)", button "Sign up"; reset: "E-mail", button "Send reset link".
 * - shell: banner with link "Stratus", button "Sign out", status "Live updates" (text "live" once the socket
 *   is open), button "Menu" (narrow screens); navigation "Main" with one link per pages.ts `nav` label
 *   ("Servers", "Drives", …); main region; link "Skip to content".
 * - list pages: heading = the kind's label; search form "Filter <label>" with textbox "Search by name" and one
 *   textbox per API filter (named as the filter); table with caption "<label>: N in all"; link "Create";
 *   links "Previous page" / "Next page"; drives also link "Upload image".
 * - detail pages: heading = the object's name (or uuid); group "Actions" with buttons named as in kinds.ts
 *   ("Start", "Stop", "Clone", "Delete", "Tag", "Share", "Attach firewall policy", "Take snapshot", …);
 *   delete asks with button "Confirm delete" (and select "Also delete" for servers).
 * - create server: "Name", "CPU (MHz)", "RAM (GiB)", "VNC password", radios in group "Boot drive",
 *   "Drive size (GiB)" / "Drive to clone", checkbox "A NIC with a public IP (DHCP)", button "Create server".
 * - errors: role "alert" with the API's error_message text.
 */
import { render } from 'preact';
import { interceptLinks } from './router.js';
import { Shell } from './shell.js';
import './base.css';

interceptLinks();
render(<Shell />, document.getElementById('app')!);
