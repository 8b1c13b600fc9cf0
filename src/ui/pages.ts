import { h, type ComponentType } from 'preact';
import { KINDS } from './kinds.js';
import { CreatePage, CreateServer, UploadPage } from './pages/create.js';
import { DetailPage } from './pages/detail.js';
import { Overview } from './pages/home.js';
import { ListPage } from './pages/list.js';
import { ResetPassword, SignIn, SignUp } from './pages/signin.js';
import { BalanceCharts, BurstLevels, UsageCharts } from './charts/pages.js';
import { OperatorAccounts, OperatorControls } from './operator/pages.js';

/**
 * The console's routes: one row per page, matched in order against the path below /ui/ (router.ts).
 * - `path`: a pattern with `:name` parameters (`servers/:id`); '' is the overview.
 * - `page`: the component; it gets the parameters and the query string.
 * - `nav`/`group`: the row's entry in the navigation (rows without `nav` are reached by links).
 * - `public`: shown without a session (sign-in, sign-up, reset); every other page needs one.
 * - `operator`: an operator page (admin token, not the account's session).
 * The kinds' list/create/detail pages come from kinds.ts; other pages (charts, operator) are rows below.
 */
export interface PageProps {
  params: Record<string, string>;
  query: URLSearchParams;
}

export interface PageRow {
  path: string;
  page: ComponentType<PageProps>;
  nav?: string;
  group?: string;
  public?: boolean;
  operator?: boolean;
}

const kindPages: PageRow[] = KINDS.flatMap((def) => [
  ...(def.kind === 'servers'
    ? [{ path: 'servers/new', page: CreateServer }]
    : def.kind === 'drives'
      ? [
          { path: 'drives/new', page: () => h(CreatePage, { def }) },
          { path: 'drives/upload', page: UploadPage },
        ]
      : def.create
        ? [{ path: `${def.kind}/new`, page: () => h(CreatePage, { def }) }]
        : []),
  { path: def.kind, page: () => h(ListPage, { def }), nav: def.label, group: def.group },
  ...(def.singleton || def.idKey === '' ? [] : [{ path: `${def.kind}/:id`, page: ({ params }: PageProps) => h(DetailPage, { def, id: params.id }) }]),
]);

export const PAGES: PageRow[] = [
  { path: '', page: Overview, nav: 'Overview', group: 'Home' },
  { path: 'signin', page: SignIn, public: true },
  { path: 'signup', page: SignUp, public: true },
  { path: 'reset', page: ResetPassword, public: true },
  ...kindPages,
  { path: 'charts/balance', page: BalanceCharts, nav: 'Balance & spending', group: 'Charts' },
  { path: 'charts/usage', page: UsageCharts, nav: 'Usage', group: 'Charts' },
  { path: 'charts/levels', page: BurstLevels, nav: 'Burst levels', group: 'Charts' },
  { path: 'operator/accounts', page: OperatorAccounts, nav: 'Accounts', group: 'Operator', operator: true },
  { path: 'operator/clock', page: OperatorControls, nav: 'Clock & faults', group: 'Operator', operator: true },
];
