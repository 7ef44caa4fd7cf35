/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * slots.c - connection slots per client: see slots.h.
 *
 * A small chained hash table of clients holding slots, under one mutex
 * (taken once when a connection is accepted and once when it closes); a
 * client's entry goes when its last slot does, so the table holds only
 * clients with open connections.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slots.h"

#define SLOTS_BUCKETS 256

struct slot_client {
	struct slot_client *next;
	unsigned held;
	char key[];
};

struct slots {
	pthread_mutex_t lock; /* everything below */
	unsigned per_client_max;
	unsigned n_clients;
	struct slot_client *bucket[SLOTS_BUCKETS];
};

struct slots *
slots_new(unsigned per_client_max)
{
	struct slots *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->per_client_max = per_client_max;
	return s;
}

void
slots_free(struct slots *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < SLOTS_BUCKETS; i++) {
		struct slot_client *c = s->bucket[i], *next;
		for (; c; c = next) {
			next = c->next;
			free(c);
		}
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* FNV-1a. */
static unsigned
slots_hash(const char *key)
{
	uint32_t h = 2166136261u;

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 16777619u;
	return h % SLOTS_BUCKETS;
}

bool
slots_take(struct slots *s, const char *client)
{
	struct slot_client **pp = &s->bucket[slots_hash(client)], *c;
	bool ok = true;

	pthread_mutex_lock(&s->lock);
	for (c = *pp; c && strcmp(c->key, client) != 0; c = c->next)
		;
	if (!c) {
		size_t len = strlen(client) + 1;
		c = malloc(sizeof *c + len);
		if (c) {
			memcpy(c->key, client, len);
			c->held = 0;
			c->next = *pp;
			*pp = c;
			s->n_clients++;
		}
	}
	if (!c || c->held >= s->per_client_max)
		ok = false;
	else
		c->held++;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

void
slots_release(struct slots *s, const char *client)
{
	struct slot_client **pp = &s->bucket[slots_hash(client)], *c;

	pthread_mutex_lock(&s->lock);
	for (; (c = *pp) && strcmp(c->key, client) != 0; pp = &c->next)
		;
	if (c && c->held > 0 && --c->held == 0) {
		*pp = c->next;
		free(c);
		s->n_clients--;
	}
	pthread_mutex_unlock(&s->lock);
}

unsigned
slots_held(struct slots *s, const char *client)
{
	struct slot_client *c;
	unsigned n = 0;

	pthread_mutex_lock(&s->lock);
	for (c = s->bucket[slots_hash(client)]; c; c = c->next)
		if (strcmp(c->key, client) == 0) {
			n = c->held;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	return n;
}

unsigned
slots_clients(struct slots *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned n = s->n_clients;
	pthread_mutex_unlock(&s->lock);
	return n;
}
