// A virtualised table: only the rows in view (plus a few) exist in the DOM, so 10,000
// applications scroll as smoothly as ten.

import { h, fill } from "./dom.js";

const OVERSCAN = 8;

export class VirtualTable {
  /** columns: [{title, width ("1fr", "120px"), cell(row) → Node|string}] */
  constructor(columns, { rowHeight = 38, onOpen, empty = "Nothing here." } = {}) {
    this.columns = columns;
    this.rowHeight = rowHeight;
    this.onOpen = onOpen;
    this.emptyText = empty;
    this.rows = [];
    const template = columns.map((c) => c.width || "1fr").join(" ");
    this.head = h("div", { class: "vt-head", style: { gridTemplateColumns: template } }, columns.map((c) => h("div", {}, c.title)));
    this.body = h("div", { style: { position: "relative" } });
    this.el = h("div", { class: "vt card flush", role: "table", onscroll: () => this.paint() }, this.head, this.body);
    this.template = template;
    new ResizeObserver(() => this.paint()).observe(this.el);
  }

  setRows(rows) {
    this.rows = rows;
    this.body.style.height = `${rows.length * this.rowHeight}px`;
    this.painted = null;
    this.paint();
  }

  paint() {
    const top = Math.max(0, this.el.scrollTop - this.head.offsetHeight);
    const first = Math.max(0, Math.floor(top / this.rowHeight) - OVERSCAN);
    const count = Math.ceil(this.el.clientHeight / this.rowHeight) + 2 * OVERSCAN;
    const last = Math.min(this.rows.length, first + count);
    const span = `${first}:${last}`;
    if (this.painted === span) return;
    this.painted = span;
    if (!this.rows.length) { fill(this.body, h("div", { class: "vt-empty" }, this.emptyText)); return; }
    const out = [];
    for (let i = first; i < last; i++) {
      const row = this.rows[i];
      out.push(h("div", {
        class: "vt-row", role: "row", style: { top: `${i * this.rowHeight}px`, gridTemplateColumns: this.template, height: `${this.rowHeight}px` },
        onclick: () => this.onOpen && this.onOpen(row),
      }, this.columns.map((c) => h("div", { role: "cell" }, c.cell(row)))));
    }
    fill(this.body, out);
  }
}
