/*
 * The one compiled PlainBuffer parser: walks rows, verifies every CRC-8 and reports cells to a visitor.
 *
 * Shared by the files of the one compiled extension, _speedups: the object decoder (_speedups.c: its visitor builds
 * Row/Column tuples) and the Arrow builders (_arrow.c: its visitor appends straight into Arrow buffers), so the
 * format is parsed by one piece of C. It knows no Python objects: a failure is a pb_error (kind plus offsets) that each includer turns
 * into what it needs (_speedups.c: decode.py's exception and message; the Arrow builders: "fall back to the
 * object path"). Checks happen in decode.py's order, and the visitor is called at the points where decode.py
 * would build a value, so a visitor's own failures (invalid UTF-8) come in decode.py's order too.
 *
 * Layout (format.py):
 *   row  = 01 pk_cell* [02 data_cell+] [08] [0B ext_len:u32 (0C 13000000 0D epoch 0E ts 0F idx)] 09 row_crc
 *   cell = 03 04 name_len:u32 name [05 len:u32 type payload] [06 op] [07 ts:i64] 0A cell_crc
 * Include after Python.h (for Py_ssize_t).
 */
#ifndef AIRFLOW_TABLESTORE_PLAINBUFFER_PARSE_H
#define AIRFLOW_TABLESTORE_PLAINBUFFER_PARSE_H

#include <stdint.h>
#include <string.h>

#define TAG_ROW_PK 0x01
#define TAG_ROW_DATA 0x02
#define TAG_CELL 0x03
#define TAG_CELL_NAME 0x04
#define TAG_CELL_VALUE 0x05
#define TAG_CELL_TYPE 0x06
#define TAG_CELL_TIMESTAMP 0x07
#define TAG_DELETE_ROW_MARKER 0x08
#define TAG_ROW_CHECKSUM 0x09
#define TAG_CELL_CHECKSUM 0x0A
#define TAG_EXTENSION 0x0B
#define TAG_SEQ_INFO 0x0C
#define TAG_SEQ_INFO_EPOCH 0x0D
#define TAG_SEQ_INFO_TS 0x0E
#define TAG_SEQ_INFO_ROW_INDEX 0x0F

#define VT_INTEGER 0x00
#define VT_DOUBLE 0x01
#define VT_BOOLEAN 0x02
#define VT_STRING 0x03
#define VT_NULL 0x06
#define VT_BLOB 0x07
#define VT_INF_MIN 0x09
#define VT_INF_MAX 0x0A
#define VT_AUTO_INCREMENT 0x0B
#define VT_ABSENT (-1) /* a cell without a value field (decode.py: None) */

#define OP_PUT (-1) /* a cell without an op byte */

static const unsigned char PB_HEADER[4] = {0x75, 0x00, 0x00, 0x00};
static const unsigned char SEQ_ONLY_PREFIX[9] = {0x18, 0x00, 0x00, 0x00, 0x0c, 0x13, 0x00, 0x00, 0x00};

/* ---- CRC-8: polynomial 0x07, MSB first, init 0 ------------------------------------------------------ */

/* The tables live in _speedups.c (the module's init fills them once) and are shared by every file of the extension.
 * pb_crc_power[k][x]: the table applied k + 1 times. The CRC is linear, so after 8 bytes b0..b7 from state s it is
 * T^8[s ^ b0] ^ T^7[b1] ^ ... ^ T^1[b7]: eight independent lookups instead of a chain of eight. */
/* Hidden: shared between the extension's files only, so they are reached directly, not through the GOT. */
#if defined(__GNUC__) || defined(__clang__)
#define PB_SHARED __attribute__((visibility("hidden")))
#else
#define PB_SHARED
#endif
extern PB_SHARED unsigned char pb_crc_table[256];
extern PB_SHARED unsigned char pb_crc_power[8][256];
PB_SHARED void pb_build_crc_table(void);

static inline unsigned int crc_fold(unsigned int crc, const unsigned char *p, Py_ssize_t len) {
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        crc = pb_crc_power[7][crc ^ p[i]] ^ pb_crc_power[6][p[i + 1]] ^ pb_crc_power[5][p[i + 2]] ^
              pb_crc_power[4][p[i + 3]] ^ pb_crc_power[3][p[i + 4]] ^ pb_crc_power[2][p[i + 5]] ^
              pb_crc_power[1][p[i + 6]] ^ pb_crc_power[0][p[i + 7]];
    }
    for (; i < len; i++) {
        crc = pb_crc_table[crc ^ p[i]];
    }
    return crc;
}

/* ---- little-endian reads --------------------------------------------------------------------------- */

static inline uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline int64_t read_i64(const unsigned char *p) {
    uint64_t v = (uint64_t)read_u32(p) | ((uint64_t)read_u32(p + 4) << 32);
    return (int64_t)v;
}

static inline int32_t read_i32(const unsigned char *p) { return (int32_t)read_u32(p); }

/* start + len, or n + 1 ("past the end") when that would pass n: a u32 length never overflows a 32-bit
   Py_ssize_t into a negative end (which would move the parser backwards). start <= n. */
static inline Py_ssize_t bounded_end(Py_ssize_t start, uint32_t len, Py_ssize_t n) {
    return (uint64_t)len > (uint64_t)(n - start) ? n + 1 : start + (Py_ssize_t)len;
}

/* ---- what the parser reports --------------------------------------------------------------------------- */

enum {
    PB_E_TRUNCATED = 1, /* pos: the row's start */
    PB_E_BAD_TAG,       /* pos, expected */
    PB_E_EXT_OVERRUN,   /* pos: the block, aux: the extension's end */
    PB_E_SEQ_LENGTH,    /* pos: the block, aux: its length */
    PB_E_SEQ_TAGS,      /* pos: the block */
    PB_E_VALUE_TYPE,    /* pos, byte */
    PB_E_CELL_OP,       /* pos, byte */
    PB_E_CELL_CRC,      /* pos, stored, computed, name/name_len */
    PB_E_ROW_CRC,       /* pos: the row's start, stored, computed */
};

typedef struct {
    int kind;
    Py_ssize_t pos, aux;
    unsigned int byte, stored, computed;
    const char *expected;
    const unsigned char *name;
    Py_ssize_t name_len;
} pb_error;

typedef struct {
    int present;
    int64_t epoch, timestamp, row_index;
} pb_sequence;

/* Callbacks return 0 to go on; anything else stops the parse and is returned by pb_parse (so it must not be
   PB_ERROR). A value's payload: the UTF-8/blob bytes, the 8 little-endian bytes of an integer or double, the
   byte of a boolean, nothing otherwise. `cell` comes after the cell's CRC is verified, `row` after the row's. */
typedef struct {
    int (*name)(void *ctx, const unsigned char *p, Py_ssize_t len, Py_ssize_t at, unsigned int *crc);
    int (*value)(void *ctx, int vt, const unsigned char *p, Py_ssize_t len, Py_ssize_t row_start);
    int (*cell)(void *ctx, int in_pk, int has_ts, int64_t ts, int op);
    int (*row)(void *ctx, int deleted, const pb_sequence *seq);
} pb_visitor;

#define PB_OK 0
#define PB_ERROR (-1)

/* pb_parse is inlined into each caller, which passes a constant visitor: the compiler then turns the callbacks
   into direct (mostly inlined) calls, so the shared parser costs the decoder nothing per cell. */
#if defined(__GNUC__) || defined(__clang__)
#define PB_INLINE static inline __attribute__((always_inline))
#else
#define PB_INLINE static inline
#endif

/* `0B len sub-blocks` at pos (decode.py's _decode_extension): the last sequence block wins. */
static int pb_extension(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, pb_sequence *seq, Py_ssize_t *end_out,
                        pb_error *err) {
    if (pos + 5 > n) {
        err->kind = PB_E_TRUNCATED;
        return PB_ERROR;
    }
    Py_ssize_t end = bounded_end(pos + 5, read_u32(d + pos + 1), n);
    if (end > n) {
        err->kind = PB_E_TRUNCATED;
        return PB_ERROR;
    }
    Py_ssize_t p = pos + 5;
    while (p < end) {
        unsigned char sub_tag = d[p];
        if (p + 5 > n) {
            err->kind = PB_E_TRUNCATED;
            return PB_ERROR;
        }
        Py_ssize_t sub_end = bounded_end(p + 5, read_u32(d + p + 1), n);
        if (sub_end > end) {
            err->kind = PB_E_EXT_OVERRUN;
            err->pos = p;
            err->aux = end;
            return PB_ERROR;
        }
        if (sub_tag == TAG_SEQ_INFO) {
            if (sub_end - p != 24) {
                err->kind = PB_E_SEQ_LENGTH;
                err->pos = p;
                err->aux = sub_end - p - 5;
                return PB_ERROR;
            }
            if (d[p + 5] != TAG_SEQ_INFO_EPOCH || d[p + 10] != TAG_SEQ_INFO_TS || d[p + 19] != TAG_SEQ_INFO_ROW_INDEX) {
                err->kind = PB_E_SEQ_TAGS;
                err->pos = p;
                return PB_ERROR;
            }
            seq->present = 1;
            seq->epoch = read_i32(d + p + 6);
            seq->timestamp = read_i64(d + p + 11);
            seq->row_index = read_i32(d + p + 20);
        }
        p = sub_end;
    }
    *end_out = end;
    return PB_OK;
}

/* Parse the rows of d[pos:n] (after the header). PB_OK, PB_ERROR with *err filled, or a callback's code. */
PB_INLINE int pb_parse(const unsigned char *d, Py_ssize_t n, Py_ssize_t pos, const pb_visitor *v, void *ctx,
                    pb_error *err) {
    Py_ssize_t row_start = pos;
    int rc;
    memset(err, 0, sizeof(*err));

/* d[k] may be read (decode.py: an IndexError, i.e. "input truncated", otherwise). */
#define NEED(k) \
    do { \
        if ((k) >= n) { \
            goto truncated; \
        } \
    } while (0)
#define FAIL_AT(what, at) \
    do { \
        err->kind = (what); \
        err->pos = (at); \
        return PB_ERROR; \
    } while (0)
#define BAD_TAG(at, text) \
    do { \
        err->expected = (text); \
        FAIL_AT(PB_E_BAD_TAG, at); \
    } while (0)
#define VISIT(call) \
    do { \
        rc = (call); \
        if (rc != 0) { \
            return rc; \
        } \
    } while (0)

    while (pos < n) {
        row_start = pos;
        if (d[pos] != TAG_ROW_PK) {
            BAD_TAG(pos, "ROW_PK (0x01) starting a row");
        }
        pos += 1;
        unsigned int row_crc = 0;
        int in_pk = 1;
        NEED(pos);
        unsigned char tag = d[pos];
        for (;;) {
            if (tag == TAG_CELL) {
                /* -- one cell: 03 04 len name [05 len type payload] [06 op] [07 ts] 0A crc */
                if (pos + 6 > n) {
                    goto truncated;
                }
                Py_ssize_t end = bounded_end(pos + 6, read_u32(d + pos + 2), n);
                if (d[pos + 1] != TAG_CELL_NAME) {
                    BAD_TAG(pos + 1, "CELL_NAME (0x04)");
                }
                if (end > n) {
                    goto truncated;
                }
                const unsigned char *name = d + pos + 6;
                Py_ssize_t name_len = end - pos - 6;
                unsigned int crc;
                VISIT(v->name(ctx, name, name_len, pos + 6, &crc));
                pos = end;
                NEED(pos);
                tag = d[pos];
                if (tag == TAG_CELL_VALUE) {
                    Py_ssize_t vs = pos + 5;
                    Py_ssize_t ve;
                    NEED(vs);
                    unsigned char vt = d[vs];
                    if (vt == VT_STRING || vt == VT_BLOB) {
                        if (vs + 5 > n) {
                            goto truncated;
                        }
                        ve = bounded_end(vs + 5, read_u32(d + vs + 1), n);
                        if (ve > n) {
                            goto truncated;
                        }
                        VISIT(v->value(ctx, vt, d + vs + 5, ve - vs - 5, row_start));
                    } else if (vt == VT_INTEGER || vt == VT_DOUBLE) {
                        if (vs + 9 > n) {
                            goto truncated;
                        }
                        VISIT(v->value(ctx, vt, d + vs + 1, 8, row_start));
                        ve = vs + 9;
                    } else if (vt == VT_BOOLEAN) {
                        NEED(vs + 1);
                        VISIT(v->value(ctx, vt, d + vs + 1, 1, row_start));
                        ve = vs + 2;
                    } else if (vt == VT_NULL || vt == VT_INF_MIN || vt == VT_INF_MAX || vt == VT_AUTO_INCREMENT) {
                        VISIT(v->value(ctx, vt, NULL, 0, row_start));
                        ve = vs + 1;
                    } else {
                        err->byte = vt;
                        FAIL_AT(PB_E_VALUE_TYPE, vs);
                    }
                    crc = crc_fold(crc, d + vs, ve - vs);
                    pos = ve;
                    NEED(pos);
                    tag = d[pos];
                } else {
                    VISIT(v->value(ctx, VT_ABSENT, NULL, 0, row_start));
                }
                int op = OP_PUT;
                int has_ts = 0;
                int64_t ts = 0;
                if (tag == TAG_CELL_TIMESTAMP) { /* the usual case: a version, no cell op */
                    if (pos + 9 > n) {
                        goto truncated;
                    }
                    has_ts = !in_pk; /* a key cell's timestamp is checksummed, not kept */
                    ts = read_i64(d + pos + 1);
                    crc = crc_fold(crc, d + pos + 1, 8);
                    pos += 9;
                    NEED(pos);
                    tag = d[pos];
                } else if (tag == TAG_CELL_TYPE) { /* update/delete cells: op, then maybe a timestamp */
                    NEED(pos + 1);
                    unsigned char op_byte = d[pos + 1];
                    if (op_byte != 1 && op_byte != 3 && op_byte != 4) { /* model.CellOp's bytes */
                        err->byte = op_byte;
                        FAIL_AT(PB_E_CELL_OP, pos + 1);
                    }
                    op = op_byte;
                    pos += 2;
                    NEED(pos);
                    tag = d[pos];
                    if (tag == TAG_CELL_TIMESTAMP) {
                        if (pos + 9 > n) {
                            goto truncated;
                        }
                        has_ts = !in_pk;
                        ts = read_i64(d + pos + 1);
                        crc = crc_fold(crc, d + pos + 1, 8);
                        pos += 9;
                        NEED(pos);
                        tag = d[pos];
                    }
                    crc = pb_crc_table[crc ^ op_byte]; /* the op byte is checksummed after the timestamp */
                }
                if (tag != TAG_CELL_CHECKSUM) {
                    BAD_TAG(pos, "CELL_CHECKSUM (0x0a) or a cell field");
                }
                NEED(pos + 1);
                if (d[pos + 1] != crc) {
                    err->stored = d[pos + 1];
                    err->computed = crc;
                    err->name = name;
                    err->name_len = name_len;
                    FAIL_AT(PB_E_CELL_CRC, pos + 1);
                }
                row_crc = pb_crc_table[row_crc ^ crc];
                pos += 2;
                VISIT(v->cell(ctx, in_pk, has_ts, ts, op));
                NEED(pos);
                tag = d[pos];
            } else if (tag == TAG_ROW_DATA && in_pk) {
                in_pk = 0;
                pos += 1;
                NEED(pos);
                tag = d[pos];
            } else {
                break;
            }
        }
        int deleted = 0;
        if (tag == TAG_DELETE_ROW_MARKER) {
            deleted = 1;
            row_crc = pb_crc_table[row_crc ^ 1];
            pos += 1;
            NEED(pos);
            tag = d[pos];
        } else {
            row_crc = pb_crc_table[row_crc];
        }
        pb_sequence seq = {0, 0, 0, 0};
        if (tag == TAG_EXTENSION) {
            if (pos + 10 <= n && memcmp(d + pos + 1, SEQ_ONLY_PREFIX, 9) == 0) {
                /* The usual extension: sequence info only (0B 18000000 0C 13000000 0D .. 0E .. 0F ..). */
                Py_ssize_t q = pos + 10;
                if (q + 19 > n) {
                    goto truncated;
                }
                if (d[q] != TAG_SEQ_INFO_EPOCH || d[q + 5] != TAG_SEQ_INFO_TS || d[q + 14] != TAG_SEQ_INFO_ROW_INDEX) {
                    FAIL_AT(PB_E_SEQ_TAGS, pos + 5);
                }
                seq.present = 1;
                seq.epoch = read_i32(d + q + 1);
                seq.timestamp = read_i64(d + q + 6);
                seq.row_index = read_i32(d + q + 15);
                pos += 29;
            } else {
                Py_ssize_t end = 0;
                if (pb_extension(d, n, pos, &seq, &end, err) != PB_OK) {
                    if (err->kind == PB_E_TRUNCATED) {
                        goto truncated;
                    }
                    return PB_ERROR;
                }
                pos = end;
            }
            NEED(pos);
            tag = d[pos];
        }
        if (tag != TAG_ROW_CHECKSUM) {
            BAD_TAG(pos, in_pk ? "CELL, ROW_DATA, DELETE_ROW_MARKER, EXTENSION or ROW_CHECKSUM (0x09)"
                               : "ROW_CHECKSUM (0x09)");
        }
        NEED(pos + 1);
        if (d[pos + 1] != row_crc) {
            err->stored = d[pos + 1];
            err->computed = row_crc;
            FAIL_AT(PB_E_ROW_CRC, row_start);
        }
        pos += 2;
        VISIT(v->row(ctx, deleted, seq.present ? &seq : NULL));
    }
    return PB_OK;

truncated:
    err->kind = PB_E_TRUNCATED;
    err->pos = row_start;
    return PB_ERROR;
#undef NEED
#undef FAIL_AT
#undef BAD_TAG
#undef VISIT
}

/* ---- strict UTF-8 (what Python's decoder accepts: no overlongs, surrogates or code points past U+10FFFF) --- */

static inline int pb_utf8_valid(const unsigned char *p, Py_ssize_t len) {
    Py_ssize_t i = 0;
    while (i < len) {
        /* eight ASCII bytes at a time: the common case */
        if (i + 8 <= len) {
            uint64_t chunk;
            memcpy(&chunk, p + i, 8);
            if ((chunk & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = p[i];
        if (c < 0x80) {
            i += 1;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= len || (p[i + 1] & 0xC0) != 0x80) {
                return 0;
            }
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= len || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80) {
                return 0;
            }
            if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F)) {
                return 0; /* overlong, or a surrogate */
            }
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= len || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80 ||
                (p[i + 3] & 0xC0) != 0x80) {
                return 0;
            }
            if ((c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] > 0x8F)) {
                return 0;
            }
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* A visitor's cell callback for visitors that keep nothing of cells (they only check, or count rows). */
static inline int pb_ignore_cell(void *ctx, int in_pk, int has_ts, int64_t ts, int op) {
    (void)ctx;
    (void)in_pk;
    (void)has_ts;
    (void)ts;
    (void)op;
    return 0;
}

#endif
