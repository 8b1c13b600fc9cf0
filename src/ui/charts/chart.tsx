import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Columns } from './series.js';
import css from './charts.module.css';

/**
 * One uPlot chart (uPlot: a small, fast canvas time-series library, bundled; design.md's pick) in a
 * figure with a caption. The chart follows its container's width (a ResizeObserver) and is rebuilt when its
 * data change; the figure says what it shows in text too (`summary`, and `data-points`/`data-last` for
 * whoever reads the page without looking at the canvas: screen readers get the summary, tests the data).
 */
export interface SeriesSpec {
  label: string;
  stroke: string;
  fill?: string;
  /** Drawn as steps (a balance holds between entries) rather than a line. */
  stepped?: boolean;
  /** Points only (a price per level). */
  points?: boolean;
  dash?: number[];
}

export interface ChartProps {
  id: string;
  title: string;
  columns: Columns;
  series: SeriesSpec[];
  /** How a y value reads on the axis and in the legend. */
  format?: (n: number) => string;
  /** x is a time (seconds) unless false: then plain numbers (levels). */
  time?: boolean;
  xLabel?: string;
  /** Vertical markers (x values) drawn over the plot, with a label each (the level in force). */
  markers?: { x: number; label: string; color: string }[];
  summary: string;
  height?: number;
}

const pathsFor = (s: SeriesSpec) => (s.stepped ? uPlot.paths.stepped!({ align: 1 }) : s.points ? () => null : undefined);

export function Chart(props: ChartProps) {
  const holder = useRef<HTMLDivElement>(null);
  const { columns, series, format, time = true, markers = [], height = 220 } = props;
  const points = columns[0].length;
  useEffect(() => {
    const el = holder.current;
    if (!el || !points) return;
    const fmt = format ?? ((n: number) => String(n));
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 240),
      height,
      // One point alone: a day either side of it (uPlot would spread a lone time over years).
      scales: { x: points === 1 ? { time, range: (_u, min, max) => [min - (time ? 86_400 : 1), max + (time ? 86_400 : 1)] } : { time } },
      legend: { live: true },
      axes: [
        { label: props.xLabel, stroke: '#4b5563', grid: { stroke: '#eef0f3' } },
        { stroke: '#4b5563', grid: { stroke: '#eef0f3' }, size: 96, values: (_u, vals) => vals.map((v) => (v === null ? '' : fmt(v))) },
      ],
      series: [
        { label: time ? 'Time' : (props.xLabel ?? 'x') },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.stroke,
          fill: s.fill,
          width: 2,
          dash: s.dash,
          paths: pathsFor(s),
          points: { show: s.points ? true : points < 40, size: s.points ? 8 : 4, fill: s.stroke },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : fmt(v)),
        })),
      ],
      hooks: {
        draw: [
          (u) => {
            // The markers: a labelled vertical line at each x (the burst level in force, the next one).
            const ctx = u.ctx;
            for (const m of markers) {
              const x = Math.round(u.valToPos(m.x, 'x', true));
              ctx.save();
              ctx.strokeStyle = m.color;
              ctx.fillStyle = m.color;
              ctx.lineWidth = 2 * devicePixelRatio;
              ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
              ctx.beginPath();
              ctx.moveTo(x, u.bbox.top);
              ctx.lineTo(x, u.bbox.top + u.bbox.height);
              ctx.stroke();
              ctx.font = `${12 * devicePixelRatio}px system-ui, sans-serif`;
              ctx.fillText(m.label, x + 4 * devicePixelRatio, u.bbox.top + 14 * devicePixelRatio);
              ctx.restore();
            }
          },
        ],
      },
    };
    const plot = new uPlot(opts, columns as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(el.clientWidth, 240), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [columns, series, format, time, markers, height, points, props.xLabel]);
  const lastSeries = columns[1] ?? [];
  const last = lastSeries.length ? lastSeries[lastSeries.length - 1] : null;
  return (
    <figure class={css.figure} id={props.id} data-chart={props.id} data-points={points} data-last={last ?? ''}>
      <figcaption class={css.caption}>
        <strong>{props.title}</strong>
        <span class={css.summary}>{props.summary}</span>
      </figcaption>
      {points ? <div ref={holder} class={css.plot} /> : <p class={css.empty}>Nothing recorded yet.</p>}
    </figure>
  );
}
