/*
 * etcd/buf.c - the byte buffer requests are built in and answers read into,
 * and base64 (keys and values travel base64 in etcd's JSON).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void etc__buf_init(struct etc__buf *b, size_t max)
{
    etc__buf_init_json(b, max, ETC__JSON_NONE);
}

void etc__buf_init_json(struct etc__buf *b, size_t max, int json)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max;
    b->over = 0;
    b->json = json;
    b->in_str = b->esc = 0;
    b->tree = 0;
}

void etc__buf_free(struct etc__buf *b)
{
    free(b->p);
    etc__buf_init_json(b, b->max, b->json);
}

/* Room for n more bytes and the NUL. */
static int reserve(struct etc__buf *b, size_t n)
{
    if (n > b->max || b->len > b->max - n) {
        b->over = 1;
        return ETC_ENOMEM;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return ETC_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return ETC_ENOMEM;
    b->p = p;
    b->cap = cap;
    return ETC_OK;
}

int etc__buf_add(struct etc__buf *b, const void *p, size_t n)
{
    int rc = reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return ETC_OK;
}

/*
 * What json-c allocates for each piece of a text, measured with json-c 0.16
 * on x86-64 and rounded up: an object 792 bytes (its hash table comes with
 * 16 slots), an array 152, a number 72, a short string 88. A value is
 * counted at the comma after it, a member's key at its colon, and every byte
 * of a string once more (its copy). So 16 MB of "{}," cost about 4.5 GiB
 * parsed, and are refused after some 150 KB.
 */
#define COST_OBJECT UINT64_C(800)
#define COST_ARRAY  UINT64_C(160)
#define COST_VALUE  UINT64_C(96)
#define COST_KEY    UINT64_C(48)

static void json_scan(struct etc__buf *b, const char *p, size_t n)
{
    uint64_t tree = b->tree;
    int in_str = b->in_str, esc = b->esc;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            tree++;
            if (esc)
                esc = 0;
            else if (ch == '\\')
                esc = 1;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        switch (ch) {
        case '"':
            in_str = 1;
            break;
        case '{':
            tree += COST_OBJECT;
            break;
        case '[':
            tree += COST_ARRAY;
            break;
        case ',':
            tree += COST_VALUE;
            break;
        case ':':
            tree += COST_KEY;
            break;
        case '\n':
            if (b->json == ETC__JSON_LINES)
                tree = 0;
            break;
        default:
            break;
        }
    }
    b->tree = tree;
    b->in_str = in_str;
    b->esc = esc;
}

int etc__buf_add_json(struct etc__buf *b, const void *p, size_t n)
{
    int rc = etc__buf_add(b, p, n);
    if (rc)
        return rc;
    json_scan(b, p, n);
    if (b->tree > b->max || b->cap > b->max - b->tree) {
        b->over = 1;
        return ETC_ENOMEM;
    }
    return ETC_OK;
}

int etc__buf_str(struct etc__buf *b, const char *s)
{
    return etc__buf_add(b, s, strlen(s));
}

int etc__buf_b64(struct etc__buf *b, const void *p, size_t n)
{
    const unsigned char *s = p;
    if (n > (SIZE_MAX - 3) / 4 * 3)
        return ETC_ENOMEM;
    int rc = reserve(b, (n + 2) / 3 * 4);
    if (rc)
        return rc;
    char *o = b->p + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)(o - b->p);
    b->p[b->len] = '\0';
    return ETC_OK;
}

int etc__buf_i64(struct etc__buf *b, int64_t v)
{
    char tmp[24], *e = tmp + sizeof tmp, *s = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--s = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--s = '-';
    return etc__buf_add(b, s, (size_t)(e - s));
}

int etc__buf_json_str(struct etc__buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = etc__buf_add(b, "\"", 1);
    for (; !rc && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            char esc[2] = {'\\', (char)ch};
            rc = etc__buf_add(b, esc, 2);
        } else if (ch < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            rc = etc__buf_add(b, esc, 6);
        } else {
            rc = etc__buf_add(b, s, 1);
        }
    }
    return rc ? rc : etc__buf_add(b, "\"", 1);
}

static int field_start(struct etc__buf *b, int comma, const char *name)
{
    int rc = comma ? etc__buf_add(b, ",", 1) : 0;
    if (!rc)
        rc = etc__buf_add(b, "\"", 1);
    if (!rc)
        rc = etc__buf_str(b, name);
    if (!rc)
        rc = etc__buf_add(b, "\":\"", 3);
    return rc;
}

int etc__buf_field_b64(struct etc__buf *b, int comma, const char *name, const void *p, size_t n)
{
    int rc = field_start(b, comma, name);
    if (!rc)
        rc = etc__buf_b64(b, p, n);
    if (!rc)
        rc = etc__buf_add(b, "\"", 1);
    return rc;
}

int etc__buf_field_i64(struct etc__buf *b, int comma, const char *name, int64_t v)
{
    int rc = field_start(b, comma, name);
    if (!rc)
        rc = etc__buf_i64(b, v);
    if (!rc)
        rc = etc__buf_add(b, "\"", 1);
    return rc;
}

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int etc__b64_decode(const char *in, size_t n, char *out, size_t *outlen)
{
    if (n % 4)
        return ETC_ECORRUPT;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = 0;
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            unsigned char ch = (unsigned char)in[i + j];
            int d = 0;
            if (ch == '=' && i + 4 == n && j >= 2 && (j == 3 || in[i + 3] == '=')) {
                pad++;
                d = 0;
            } else if (pad || (d = b64_value(ch)) < 0) {
                return ETC_ECORRUPT;
            }
            v = v << 6 | (uint32_t)d;
        }
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8);
        if (pad < 1)
            out[o++] = (char)v;
    }
    out[o] = '\0';
    *outlen = o;
    return ETC_OK;
}
