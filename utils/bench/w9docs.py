#!/usr/bin/env python3
"""W9's JSON documents: profiles, product records and events of 0.5-2 KB.

Every text in them comes from corpora that Debian packages ship:
  - fortunes and fortunes-min (/usr/share/games/fortunes): quotes for bios,
    product descriptions, reviews and titles; the "-- Name" attributions
    under the quotes for people's names;
  - iso-codes (/usr/share/iso-codes/json): countries, their subdivisions,
    currencies and languages.
Numbers, ids and times are drawn from a seeded generator, so a run gives
the same documents on every machine with the same packages.

  utils/bench/w9docs.py N [SEED] [w9|orders] > docs.jsonl     one document a line

"orders" gives documents of another schema (order records), which the
drift study (strcomp-drift) writes over W9's.

bench.py imports documents() from here.
"""
import json
import random
import re
import sys
from pathlib import Path

FORTUNES = Path("/usr/share/games/fortunes")
ISO = Path("/usr/share/iso-codes/json")
SIZE = (500, 2048)


def _corpus():
    quotes, names = set(), set()
    for f in sorted(FORTUNES.iterdir()) if FORTUNES.is_dir() else ():
        if "." in f.name or not f.is_file():
            continue
        for q in f.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            lines = q.strip().split("\n")
            m = re.match(r"^\s*--\s*([A-Z][a-z]+(?: [A-Z]\.)?(?: [A-Z][a-z]+){1,2})\s*[,(]?", lines[-1]) if lines else None
            if m:
                names.add(m.group(1))
                lines = lines[:-1]
            t = " ".join(" ".join(lines).split())
            if 20 <= len(t) <= 400:
                quotes.add(t)
    iso = {}
    for key, fname in (("3166-1", "iso_3166-1.json"), ("3166-2", "iso_3166-2.json"), ("4217", "iso_4217.json"),
                       ("639-3", "iso_639-3.json")):
        p = ISO / fname
        if not p.exists():
            sys.exit(f"W9 needs iso-codes ({p})")
        iso[key] = json.loads(p.read_text())[key]
    if len(quotes) < 1000 or len(names) < 500:
        sys.exit(f"W9 needs the fortunes corpus in {FORTUNES} (utils/install-deps.sh bench installs it)")
    return sorted(quotes), sorted(names), iso


def _words(text):
    return [w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)]


class Docs:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.quotes, self.names, iso = _corpus()
        self.countries = iso["3166-1"]
        self.regions = {}
        for s in iso["3166-2"]:
            self.regions.setdefault(s["code"].split("-")[0], []).append(s["name"])
        self.currencies = [c["alpha_3"] for c in iso["4217"]]
        self.languages = [l["name"] for l in iso["639-3"] if l.get("type") == "L"]
        self.events = ["page_view", "click", "add_to_cart", "purchase", "search", "login", "logout", "share",
                       "comment", "signup"]

    def _time(self):
        return "2026-%02d-%02dT%02d:%02d:%02d.%03dZ" % (self.r.randint(1, 12), self.r.randint(1, 28),
                                                         self.r.randrange(24), self.r.randrange(60),
                                                         self.r.randrange(60), self.r.randrange(1000))

    def _place(self):
        c = self.r.choice(self.countries)
        region = self.r.choice(self.regions.get(c["alpha_2"], [c["name"]]))
        return c, region

    def _user(self, name):
        w = self.r.choice(_words(self.r.choice(self.quotes)) or ["user"])
        return name.split()[0].lower() + "_" + w + str(self.r.randrange(1000))

    def profile(self, i):
        r = self.r
        name = r.choice(self.names)
        c, region = self._place()
        user = self._user(name)
        return {
            "id": i, "username": user, "name": name,
            "email": user + "@" + r.choice(["example.com", "mail.example.org", "users.example.net"]),
            "bio": r.choice(self.quotes),
            "location": {"country": c["name"], "country_code": c["alpha_2"], "region": region},
            "languages": r.sample(self.languages, r.randint(1, 3)),
            "created_at": self._time(), "last_seen": self._time(),
            "followers": int(r.paretovariate(1.2) * 10), "following": r.randrange(2000),
            "verified": r.random() < 0.1,
            "settings": {"theme": r.choice(["light", "dark", "system"]), "locale": c["alpha_2"].lower(),
                         "notifications": {"email": r.random() < 0.5, "push": r.random() < 0.7,
                                           "digest": r.choice(["daily", "weekly", "never"])}},
            "interests": sorted(set(_words(r.choice(self.quotes))))[:r.randint(2, 6)],
        }

    def product(self, i):
        r = self.r
        title = " ".join(_words(r.choice(self.quotes))[:r.randint(2, 5)]).title()
        c, _ = self._place()
        reviews = [{"user": self._user(r.choice(self.names)), "stars": r.randint(1, 5), "text": r.choice(self.quotes),
                    "at": self._time()} for _ in range(r.randint(0, 3))]
        return {
            "sku": "SKU-%08d" % i, "title": title, "description": r.choice(self.quotes),
            "brand": r.choice(self.names).split()[-1] + " " + r.choice(["Co.", "Ltd", "Inc.", "GmbH", "& Sons"]),
            "price": {"amount": round(r.lognormvariate(3, 1), 2), "currency": r.choice(self.currencies[:40])},
            "stock": r.randrange(500), "rating": round(r.uniform(1, 5), 1), "origin": c["name"],
            "categories": sorted(set(_words(r.choice(self.quotes))))[:r.randint(1, 4)],
            "dimensions": {"w": r.randrange(1, 100), "h": r.randrange(1, 100), "d": r.randrange(1, 100),
                           "unit": "cm"},
            "reviews": reviews, "updated_at": self._time(),
        }

    def event(self, i):
        r = self.r
        c, region = self._place()
        kind = r.choice(self.events)
        words = _words(r.choice(self.quotes))
        return {
            "event_id": "%032x" % r.getrandbits(128), "type": kind, "ts": self._time(), "user_id": r.randrange(10**7),
            "session": "%016x" % r.getrandbits(64),
            "page": "/" + "/".join(words[:r.randint(1, 3)]), "referrer": r.choice(
                ["", "https://www.example.com/", "https://search.example.org/?q=" + "+".join(words[:3])]),
            "geo": {"country": c["alpha_2"], "region": region},
            "device": {"type": r.choice(["desktop", "mobile", "tablet"]), "os": r.choice(
                ["Linux", "Android 14", "iOS 18", "Windows 11", "macOS 15"]), "lang": r.choice(self.languages)},
            "props": {"query": " ".join(words[:r.randint(1, 4)]), "position": r.randrange(50),
                      "value": round(r.random() * 100, 2), "comment": r.choice(self.quotes)},
        }

    def order(self, i):
        """Another schema, for the drift study (utils/bench/strcomp-drift): orders whose field names,
        nesting and texts share little with the three above."""
        r = self.r
        c, region = self._place()
        lines = [{"lineNo": n + 1, "itemName": " ".join(_words(r.choice(self.quotes))[:r.randint(2, 4)]).upper(),
                  "qty": r.randint(1, 9), "unitCost": "%.2f" % r.lognormvariate(2, 1),
                  "giftNote": r.choice(self.quotes) if r.random() < 0.3 else None}
                 for n in range(r.randint(1, 5))]
        return {
            "OrderRef": "ORD/%04d/%07d" % (r.randint(2019, 2026), i), "Buyer": {"FullName": r.choice(self.names),
            "Language": r.choice(self.languages)}, "ShipTo": {"Nation": c["name"], "Province": region,
            "Postcode": "%05d" % r.randrange(100000)}, "Lines": lines,
            "Currency": r.choice(self.currencies[40:120]), "Status": r.choice(
                ["PLACED", "PAID", "PACKED", "SHIPPED", "DELIVERED", "RETURNED", "CANCELLED"]),
            "History": [{"When": self._time(), "What": r.choice(["created", "payment_ok", "picked", "handed_over",
                                                                 "out_for_delivery", "signed_for"])}
                        for _ in range(r.randint(1, 4))],
            "Remarks": r.choice(self.quotes),
        }

    def document(self, i, schema="w9"):
        kind = (self.profile, self.product, self.event)[i % 3] if schema == "w9" else self.order
        for _ in range(20):
            d = json.dumps(kind(i), separators=(",", ":"), ensure_ascii=False)
            if SIZE[0] <= len(d.encode()) <= SIZE[1]:
                return d
        return d


def documents(n, seed=9, schema="w9"):
    """Yields n documents, JSON text each: W9's, or with schema "orders" the drift study's."""
    g = Docs(seed)
    for i in range(n):
        yield g.document(i, schema)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    schema = sys.argv[3] if len(sys.argv) > 3 else "w9"
    for d in documents(n, seed, schema):
        print(d)
