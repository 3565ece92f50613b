/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BOLT's address translation table, read in two passes over the note: the
 * first checks every field and counts the fragments and entries, the second
 * (after what they take is charged to the budget) keeps them. Nothing is
 * allocated from a count the first pass has not seen backed by bytes.
 *
 * The encodings, as BOLT writes them (BoltAddressTranslation.cpp):
 *
 * BOLT 16: u32 fragments; each u64 output address, u32 entries, entries of
 *   (u32 output offset, u32 input offset, bit 31 set for a branch entry);
 *   then u32 cold parts, each (u64 cold address, u64 hot address).
 *
 * BOLT 19: the hot fragments, then the cold ones, each part a ULEB count.
 *   Addresses are one running ULEB delta through both parts, fragments and
 *   entries alike. A hot fragment: address, u64 function hash, ULEB blocks,
 *   ULEB secondary entry points; a cold one: address, ULEB delta of its hot
 *   fragment's index, ULEB skew. Then ULEB entries, ULEB "equal" entries
 *   (input offset = output offset + skew, their branch bits in a bitmask of
 *   ceil(equal / 8) bytes), and the entries: output address, SLEB input
 *   delta (not for equal ones), and for a block (not a branch entry) a u64
 *   block hash and a ULEB block index delta. A hot fragment ends with its
 *   secondary entry points' ULEB offsets.
 */
#include "common/elf/elf_bat.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT_BOLT_BAT 1

struct rd {
	const uint8_t *p;
	size_t len, pos;
	const char *why; /* the first problem met */
};

/* What a pass keeps: counts only (fill NULL), or the table. */
struct pass {
	struct ep_bat *fill;
	size_t nfrags, nentries, nhot;
	uint64_t hot_index;
};

static bool fail(struct rd *r, const char *why)
{
	if (!r->why)
		r->why = why;
	return false;
}

static bool take(struct rd *r, size_t n, const uint8_t **at)
{
	if (n > r->len - r->pos)
		return fail(r, "truncated");
	*at = r->p + r->pos;
	r->pos += n;
	return true;
}

static bool le(struct rd *r, int n, uint64_t *v)
{
	const uint8_t *at;
	if (!take(r, (size_t)n, &at))
		return false;
	*v = 0;
	for (int i = 0; i < n; i++)
		*v |= (uint64_t)at[i] << (8 * i);
	return true;
}

static bool uleb(struct rd *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		const uint8_t *b;
		if (!take(r, 1, &b))
			return false;
		uint64_t bits = *b & 0x7f;
		if (shift == 63 && bits > 1)
			break;
		*v |= bits << shift;
		if (!(*b & 0x80))
			return true;
	}
	return fail(r, "a LEB128 number past 64 bits");
}

static bool sleb(struct rd *r, int64_t *v)
{
	uint64_t u = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		const uint8_t *b;
		if (!take(r, 1, &b))
			return false;
		u |= (uint64_t)(*b & 0x7f) << shift;
		if (!(*b & 0x80)) {
			if (shift + 7 < 64 && (*b & 0x40))
				u |= ~(uint64_t)0 << (shift + 7);
			*v = (int64_t)u;
			return true;
		}
	}
	return fail(r, "a LEB128 number past 64 bits");
}

/* n items of at least `each` bytes fit in what is left. */
static bool count_fits(struct rd *r, uint64_t n, size_t each, const char *what)
{
	if (n > (r->len - r->pos) / each)
		return fail(r, what);
	return true;
}

static void frag_begin(struct pass *ps, uint64_t addr, uint64_t hot)
{
	if (ps->fill)
		ps->fill->frags[ps->nfrags] =
		    (struct ep_bat_frag){.addr = addr, .hot = hot, .first = (uint32_t)ps->nentries};
	ps->nfrags++;
}

/* An entry of the fragment begun last; a second one at the same output
 * offset is dropped, as BOLT's map keeps the first. */
static bool entry_add(struct rd *r, struct pass *ps, uint64_t out, uint64_t in, bool first)
{
	if (out > UINT32_MAX || in > UINT32_MAX)
		return fail(r, "an offset past 4 GiB");
	if (!ps->fill) {
		ps->nentries++;
		return true;
	}
	struct ep_bat_frag *f = &ps->fill->frags[ps->nfrags - 1];
	struct ep_bat_entry *e = ps->fill->entries;
	if (!first && f->n && e[ps->nentries - 1].out == out)
		return true;
	e[ps->nentries++] = (struct ep_bat_entry){(uint32_t)out, (uint32_t)in};
	f->n++;
	return true;
}

static bool v19_header(struct rd *r, struct pass *ps, bool cold, uint64_t addr, uint64_t *skew,
		       uint64_t *nsec)
{
	uint64_t v, hot = addr;
	const uint8_t *hash;
	if (cold) {
		if (!uleb(r, &v))
			return false;
		if (v >= ps->nhot || ps->hot_index + v >= ps->nhot)
			return fail(r, "a cold part names a hot function the table lacks");
		ps->hot_index += v;
		if (!uleb(r, skew))
			return false;
		if (*skew > INT32_MAX)
			return fail(r, "a cold part's skew past 2 GiB");
		if (ps->fill)
			hot = ps->fill->frags[ps->hot_index].addr;
	} else if (!take(r, 8, &hash) || !uleb(r, &v) || !uleb(r, nsec)) {
		return false;
	}
	frag_begin(ps, addr, hot);
	return true;
}

static bool v19_frag(struct rd *r, struct pass *ps, bool cold, uint64_t *prev)
{
	uint64_t delta, skew = 0, nsec = 0, n, equal;
	if (!uleb(r, &delta))
		return false;
	uint64_t addr = *prev + delta;
	*prev = addr;
	if (!v19_header(r, ps, cold, addr, &skew, &nsec) || !uleb(r, &n) ||
	    !count_fits(r, n, 1, "more entries than bytes") || !uleb(r, &equal))
		return false;
	if (equal > n)
		return fail(r, "more equal entries than entries");
	const uint8_t *mask;
	if (!take(r, (size_t)((equal + 7) / 8), &mask))
		return false;
	uint64_t in = 0, last = 0;
	for (uint64_t j = 0; j < n; j++) {
		if (!uleb(r, &delta))
			return false;
		uint64_t out = *prev + delta - addr;
		*prev += delta;
		if (out < last || out > UINT32_MAX)
			return fail(r, "entries out of order or past 4 GiB");
		last = out;
		if (j < equal) {
			in = ((out + skew) << 1) | ((mask[j / 8] >> (j % 8)) & 1);
		} else {
			int64_t d;
			if (!sleb(r, &d))
				return false;
			in += (uint64_t)d;
		}
		const uint8_t *hash;
		if (!(in & 1) && (!take(r, 8, &hash) || !uleb(r, &delta)))
			return false;
		if (!entry_add(r, ps, out, in, j == 0))
			return false;
	}
	if (!count_fits(r, nsec, 1, "more entry points than bytes"))
		return false;
	for (uint64_t i = 0; i < nsec; i++)
		if (!uleb(r, &delta))
			return false;
	return true;
}

static bool v19_parse(struct rd *r, struct pass *ps)
{
	uint64_t prev = 0;
	for (int cold = 0; cold < 2; cold++) {
		uint64_t n;
		if (!uleb(r, &n) || !count_fits(r, n, 3, "more functions than bytes"))
			return false;
		for (uint64_t i = 0; i < n; i++)
			if (!v19_frag(r, ps, cold, &prev))
				return false;
		if (!cold)
			ps->nhot = ps->nfrags;
	}
	return true;
}

static bool v16_parse(struct rd *r, struct pass *ps)
{
	uint64_t n, prev_addr = 0;
	if (!le(r, 4, &n) || !count_fits(r, n, 12, "more functions than bytes"))
		return false;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t addr, m, out, in, last = 0;
		if (!le(r, 8, &addr) || !le(r, 4, &m) ||
		    !count_fits(r, m, 8, "more entries than bytes"))
			return false;
		if (i && addr <= prev_addr)
			return fail(r, "functions out of order");
		prev_addr = addr;
		frag_begin(ps, addr, addr);
		for (uint64_t j = 0; j < m; j++) {
			if (!le(r, 4, &out) || !le(r, 4, &in))
				return false;
			if (out < last)
				return fail(r, "entries out of order");
			last = out;
			if (!entry_add(r, ps, out, (in & 0x7fffffff) << 1 | in >> 31, j == 0))
				return false;
		}
	}
	ps->nhot = ps->nfrags;
	if (!le(r, 4, &n) || !count_fits(r, n, 16, "more cold parts than bytes"))
		return false;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t cold, hot;
		if (!le(r, 8, &cold) || !le(r, 8, &hot))
			return false;
		if (!ps->fill)
			continue;
		struct ep_bat_frag *c = (struct ep_bat_frag *)ep_bat_frag_at(ps->fill, cold);
		const struct ep_bat_frag *h = ep_bat_frag_at(ps->fill, hot);
		if (!c || !h || c == h || h->hot != h->addr)
			return fail(r, "a cold part or its hot function is not in the table");
		c->hot = hot;
	}
	return true;
}

static int cmp_frag(const void *a, const void *b)
{
	uint64_t x = ((const struct ep_bat_frag *)a)->addr,
		 y = ((const struct ep_bat_frag *)b)->addr;
	return x < y ? -1 : x > y;
}

/* One encoding's two passes over desc; 0, or -1 with *why. */
static int parse_as(int version, const uint8_t *desc, size_t len, struct ep_elf_budget *budget,
		    struct ep_bat *out, const char **why, char *err, size_t errlen)
{
	bool (*parse)(struct rd *, struct pass *) = version == 19 ? v19_parse : v16_parse;
	struct rd r = {.p = desc, .len = len};
	struct pass ps = {0};
	*why = NULL;
	if (!parse(&r, &ps) || (r.pos != len && !fail(&r, "bytes left after the table"))) {
		*why = r.why;
		return -1;
	}
	uint64_t bytes = ps.nfrags * sizeof(*out->frags) + ps.nentries * sizeof(*out->entries);
	if (ps.nentries > UINT32_MAX || !ep_elf_charge(budget, bytes)) {
		snprintf(err, errlen,
			 "its BAT table (%zu functions, %zu entries) would take %.2f MiB, more "
			 "than the %.2f MiB %s leaves",
			 ps.nfrags, ps.nentries, (double)bytes / (1 << 20),
			 (double)(budget->limit - budget->used) / (1 << 20), budget->knob);
		*why = NULL;
		return -2;
	}
	*out = (struct ep_bat){.bolt_version = version, .bytes = bytes};
	out->frags = malloc(ps.nfrags ? ps.nfrags * sizeof(*out->frags) : 1);
	out->entries = malloc(ps.nentries ? ps.nentries * sizeof(*out->entries) : 1);
	struct pass fill = {.fill = out};
	r = (struct rd){.p = desc, .len = len};
	/* BOLT 16's cold parts look their fragments up by address: all are
	 * kept (in order) by then */
	out->nfrags = ps.nfrags;
	if (!out->frags || !out->entries)
		*why = "out of memory";
	else if (!parse(&r, &fill))
		*why = r.why ? r.why : "inconsistent";
	out->nfrags = fill.nfrags;
	out->nentries = fill.nentries;
	if (!*why) {
		qsort(out->frags, out->nfrags, sizeof(*out->frags), cmp_frag);
		for (size_t i = 1; i < out->nfrags; i++)
			if (out->frags[i].addr == out->frags[i - 1].addr)
				*why = "two functions at one address";
	}
	if (*why) {
		ep_bat_free(out);
		return -1;
	}
	return 0;
}

int ep_bat_parse(const uint8_t *note, size_t len, struct ep_elf_budget *budget, struct ep_bat *out,
		 char *err, size_t errlen)
{
	*out = (struct ep_bat){0};
	struct rd r = {.p = note, .len = note ? len : 0};
	uint64_t namesz, descsz, type;
	const uint8_t *name, *desc;
	if (!le(&r, 4, &namesz) || !le(&r, 4, &descsz) || !le(&r, 4, &type) ||
	    !take(&r, (size_t)((namesz + 3) & ~(uint64_t)3), &name) || !take(&r, descsz, &desc)) {
		snprintf(err, errlen, "its %s note is cut short (%zu bytes)", EP_BAT_SECTION, len);
		return -1;
	}
	if (type != NT_BOLT_BAT || namesz < 4 || memcmp(name, "BOLT", 4) != 0) {
		snprintf(err, errlen, "its %s section holds no BOLT BAT note", EP_BAT_SECTION);
		return -1;
	}
	const char *why19, *why16;
	int rc = parse_as(19, desc, descsz, budget, out, &why19, err, errlen);
	if (rc == -1)
		rc = parse_as(16, desc, descsz, budget, out, &why16, err, errlen);
	if (rc == -1)
		snprintf(err, errlen, "its %s note is no BAT table of BOLT 19 (%s) or BOLT 16 (%s)",
			 EP_BAT_SECTION, why19, why16);
	return rc == 0 ? 0 : -1;
}

/* A local function of .symtab and the FILE symbol before it. */
struct local_fn {
	uint64_t addr;
	size_t order;
	const char *name, *file;
	uint32_t n;
};

static int cmp_by_name(const void *pa, const void *pb)
{
	const struct local_fn *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);
	if (!c)
		c = strcmp(a->file, b->file);
	if (!c)
		c = a->addr != b->addr ? (a->addr < b->addr ? -1 : 1)
				       : (a->order > b->order) - (a->order < b->order);
	return c;
}

static int cmp_by_addr(const void *pa, const void *pb)
{
	const struct local_fn *a = pa, *b = pb;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return (a->order > b->order) - (a->order < b->order);
}

/* One walk of the symbol table: counts (fns NULL) or fills fns. */
static size_t walk_locals(Elf *elf, struct ep_elf_budget *budget, Elf_Scn *scn, const GElf_Shdr *sh,
			  Elf_Data *d, struct local_fn *fns, uint64_t *bytes)
{
	size_t n = 0;
	const char *file = NULL;
	(void)scn;
	for (size_t i = 0; i < d->d_size / sh->sh_entsize; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym))
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		const char *name = ep_elf_strptr(budget, elf, sh->sh_link, sym.st_name);
		if (type == STT_FILE) {
			file = name && name[0] ? name : NULL;
			continue;
		}
		if (!file || !name || !name[0] || GELF_ST_BIND(sym.st_info) != STB_LOCAL ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_value == 0 ||
		    sym.st_shndx == SHN_UNDEF)
			continue;
		if (fns)
			fns[n] = (struct local_fn){
			    .addr = sym.st_value, .order = i, .name = name, .file = file};
		else
			*bytes += sizeof(struct ep_bat_local) + sizeof(struct local_fn) +
				  strlen(name) + strlen(file) + 14;
		n++;
	}
	return n;
}

/* bat->locals from elf's .symtab: 0, or -1 (why) past the budget. */
static int read_locals(Elf *elf, struct ep_elf_budget *budget, struct ep_bat *bat, const char **why)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_entsize)
			break;
	Elf_Data *d = scn ? ep_elf_section_data(budget, elf, scn) : NULL;
	if (!d)
		return 0; /* stripped: "NAME/N" names stay */
	uint64_t bytes = 0;
	size_t n = walk_locals(elf, budget, scn, &sh, d, NULL, &bytes);
	if (!n)
		return 0;
	if (!ep_elf_charge(budget, bytes)) {
		*why = "its local functions' names are past the budget";
		return -1;
	}
	struct local_fn *fns = malloc(n * sizeof(*fns));
	bat->locals = malloc(n * sizeof(*bat->locals));
	bat->names = malloc(bytes);
	if (!fns || !bat->locals || !bat->names) {
		free(fns);
		*why = "out of memory";
		return -1;
	}
	n = walk_locals(elf, budget, scn, &sh, d, fns, &bytes);
	qsort(fns, n, sizeof(*fns), cmp_by_name);
	for (size_t i = 0; i < n; i++)
		fns[i].n = i && !strcmp(fns[i].name, fns[i - 1].name) &&
				   !strcmp(fns[i].file, fns[i - 1].file)
			       ? fns[i - 1].n + 1
			       : 1;
	qsort(fns, n, sizeof(*fns), cmp_by_addr);
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		int w =
		    sprintf(bat->names + off, "%s/%s/%" PRIu32, fns[i].name, fns[i].file, fns[i].n);
		bat->locals[i] = (struct ep_bat_local){fns[i].addr, bat->names + off};
		off += (size_t)w + 1;
	}
	bat->nlocals = n;
	bat->bytes += bytes;
	free(fns);
	return 0;
}

const char *ep_bat_local_name(const struct ep_bat *bat, uint64_t addr)
{
	size_t lo = 0, hi = bat->nlocals;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bat->locals[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < bat->nlocals && bat->locals[lo].addr == addr ? bat->locals[lo].name : NULL;
}

int ep_elf_bat_read(Elf *elf, struct ep_elf_budget *budget, struct ep_bat *out, char *err,
		    size_t errlen)
{
	*out = (struct ep_bat){0};
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		const char *name = ep_elf_strptr(budget, elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, EP_BAT_SECTION) != 0)
			continue;
		Elf_Data *d = ep_elf_section_data(budget, elf, scn);
		if (!d) {
			snprintf(err, errlen,
				 "its %s section (%llu bytes) not read: past the file's end or "
				 "the %.0f MiB %s",
				 EP_BAT_SECTION, (unsigned long long)sh.sh_size,
				 (double)budget->limit / (1 << 20), budget->knob);
			return -1;
		}
		if (ep_bat_parse(d->d_buf, d->d_size, budget, out, err, errlen) != 0)
			return -1;
		const char *why = NULL;
		if (read_locals(elf, budget, out, &why) != 0) {
			snprintf(err, errlen, "%s", why);
			ep_bat_free(out);
			return -1;
		}
		return 1;
	}
	return 0;
}

void ep_bat_free(struct ep_bat *bat)
{
	free(bat->frags);
	free(bat->entries);
	free(bat->locals);
	free(bat->names);
	*bat = (struct ep_bat){0};
}

const struct ep_bat_frag *ep_bat_frag_at(const struct ep_bat *bat, uint64_t addr)
{
	size_t lo = 0, hi = bat->nfrags;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bat->frags[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < bat->nfrags && bat->frags[lo].addr == addr ? &bat->frags[lo] : NULL;
}

/* Index (into f's entries) of the first entry past off: upper_bound. */
static uint32_t upper(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t off)
{
	const struct ep_bat_entry *e = bat->entries + f->first;
	uint32_t lo = 0, hi = f->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e[mid].out <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t ep_bat_translate(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t off,
			  bool branch_src)
{
	uint32_t k = upper(bat, f, off);
	if (k == 0)
		return off;
	const struct ep_bat_entry *e = &bat->entries[f->first + k - 1];
	uint64_t in = e->in >> 1;
	return branch_src ? in : off - e->out + in;
}

bool ep_bat_is_block_start(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t off)
{
	uint32_t k = upper(bat, f, off);
	if (k == 0)
		return false;
	const struct ep_bat_entry *e = &bat->entries[f->first + k - 1];
	return e->out == off && !(e->in & 1);
}

void ep_bat_fallthroughs(const struct ep_bat *bat, const struct ep_bat_frag *f, uint64_t from,
			 uint64_t to, void (*fn)(void *ctx, uint32_t from, uint32_t to), void *ctx)
{
	const struct ep_bat_entry *e = bat->entries + f->first;
	if (from >= to)
		return;
	/* the block the trace starts in: the last block entry at or before from */
	uint32_t a = upper(bat, f, from);
	do {
		if (a == 0)
			return;
		a--;
	} while (e[a].in & 1);
	uint32_t b = upper(bat, f, to);
	if (b == 0)
		return;
	b--;
	if (e[a].out >= e[b].out)
		return;
	/* each block to the next block entry, over branch entries, up to the
	 * entry the trace ends in */
	for (uint32_t i = a; i != b;) {
		uint32_t src = e[i].out;
		if (e[i].in & 1) {
			i++;
			continue;
		}
		i++;
		while ((e[i].in & 1) && i != b)
			i++;
		if (e[i].in & 1)
			break;
		fn(ctx, src, e[i].out);
	}
}
