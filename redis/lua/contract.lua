#!lua name=statefs
--[==[
contract.lua - statefs's Redis Functions library: the server side of a
shared store (statefs -o store=redis://..., docs/shared-store.md).  This
essay is its contract; the code follows it in the other files of
redis/lua/ ("Files", at the end).

Authority
---------
With a shared store, Redis decides.  Every transition of the contract is
one function of this library, run by FCALL as one atomic step: it reads
the server's TIME once, makes every check before its first write (Lua has
no rollback, so a refused call writes nothing but its refusal counter and
its outcome record), changes the store, appends one entry per change to
the tenant's log, and returns a typed outcome.  The functions make the
same checks, in the same order, with the same errno, and produce the same
state and the same .events lines as the embedded store's transitions
(store/tenant.c, parent.c, child.c, content.c, node.c, lease.c, drain.c,
reaper.c); each function below names the one it mirrors, and each file
of the library the core file it mirrors.  A mount keeps a copy of what
it shows (the mirror: the embedded store's structures) and changes it
only by applying log entries in seq order, so every number a mirror
needs (inode numbers, generations, versions, deadlines, times, sequence
numbers) is decided here and carried in the entry: a mirror never
decides anything.

What stays with the mount: names of special files and depth rules (EPERM,
EEXIST for ".stats"), the root directory's own attributes (each mount's
root is its mounter's: a new tenant's owner is passed in already
inherited from it), staged writes until publication (limits are checked
again here), permissions the kernel checks (default_permissions), the
inotify and .events machinery (fed by the log), and the estimate of the
store's clock (below).

Version
-------
sfs_version returns LIBVERSION.  Bump it when the library changes in a
way a mount can see: a key, a field, an argument, an outcome, a log
entry, a check or its order.  A mount installs its own library when the
loaded one is older (FUNCTION LOAD REPLACE) and refuses to mount when it
is newer; sfs_init records the highest version that ran on the store in
meta libversion and refuses an older mount (ELIBVERSION).  A fix that
changes nothing a mount can see (speed, a comment) needs no bump.

Keys
----
P is the store prefix (-o store_prefix, default "statefs").  Store-wide
keys carry the hash tag {P}; every key of tenant TID carries {P.tTID}, so
a tenant is one slot.  A tenant re-created under the same name is a new
TID: new keys.

  P:{P}:meta          hash: instance (16 hex digits, chosen by the first
                      mount), libversion, ino (the next inode number
                      handed out; starts at 10: root 1, its special files
                      2..9), tid (the last tenant id), seq (root log
                      seq), gseq (the store-wide order's last number:
                      entries, below; absent where there is no such
                      order), created_ms, state (ready|draining|drained),
                      drain_deadline, clock_ms (the testclock clock),
                      lim_<name> (every limit in LIMITS), gauges tenants
                      parents children links tombstones bytes, counters
                      admissions removals expiries joins leaves and
                      refused_capacity refused_quota refused_payload
                      refused_draining refused_exists refused_stale
                      refused_conflict refused_gone.
  P:{P}:tenants       hash: tenant name -> TID.
  P:{P}:log           stream: the root log (entries below).
  P:{P}:tombq         sorted set: every tombstone of the store, member
                      "TID/NAME", score its deadline (the pool ages out
                      store-wide, oldest first).
  P:{P}:op:ID         the outcome of root-level operation ID.
  P:{P.tTID}:meta     the tenant layout only (below): the tenant's own
                      meta, in its slot, with the fields of P:{P}:meta
                      (instance, every lim_*, state and drain_deadline
                      of the store's drain as fanned out, clock_ms,
                      libversion, created_ms, layout tenant, the
                      tenant's gauges and counters alone, ino in the
                      tenant's range, tid), name (the tenant's) and,
                      once the tenant is removed, gone 1: it outlives
                      its tenant.
  P:{P.tTID}:tombq    the tenant layout only: the tenant's tombstones.

  P:{P.tTID}:t        hash: name, tid, ino (the tenant's; its special
                      files are ino+1..ino+8), uid gid mode, atime mtime
                      ctime (ns), seq (the tenant log's seq), state
                      (ready|draining|drained), drain_deadline, gauges
                      parents children links tombstones bytes.
  P:{P.tTID}:parents  hash: parent name -> parent ino (PINO).
  P:{P.tTID}:p:PINO   hash: name gen uid gid mode atime mtime ctime ttl
                      deadline child_ttl links (entries in the bucket).
  P:{P.tTID}:l:PINO   hash: the bucket: child name -> state ino (SINO).
  P:{P.tTID}:s:SINO   hash: data (the content) version nlink uid gid mode
                      atime mtime ctime ttl deadline links (its links,
                      "PINO/NAME" separated by one space, newest first:
                      the order the embedded store lists them in).
  P:{P.tTID}:tombs    hash: parent name -> "GEN DEADLINE".
  P:{P.tTID}:due      sorted set: leases, member "p:PINO" or "s:SINO",
                      score the deadline.
  P:{P.tTID}:log      stream: the tenant's log (entries below).
  P:{P.tTID}:op:ID    the outcome of operation ID on this tenant.
  P:{P.tTID}:lk:SINO  string: state SINO's locks and waiters, and
  P:{P.tTID}:ls:SID   string with a TTL: a mount's lock session in the
                      tenant (lock.lua's essay).

Names never contain white space or '/', so "PINO/NAME" and lists
separated by spaces are unambiguous.  A removed tenant's keys are deleted
at once but its log, which ends with the removal, expires LOG_KEEP_MS
later, and op records expire OP_KEEP_MS after they were made.

Numbers and time
----------------
Durations (ttls, tombstone_ttl_ms, default_ttl_ms, drain_window_ms, a
clock advance) are at most 10^12 ms (STORE_DURATION_MAX_MS), else
EINVAL, as in the embedded store.
Every number is a whole decimal below 10^15 (ttls, sizes, inode numbers:
Lua's numbers are doubles, exact below 2^53, and every sum made here stays
below it); a larger one is EINVAL.  Times of nodes (atime mtime ctime)
are ns since the epoch, kept as decimal strings, never added to.

The store's clock is the server's TIME in ms (now_ms).  With testclock
(lim_testclock 1) it is meta clock_ms alone: a manual clock that starts
at 0 and moves only by sfs_clock_advance, as the embedded store's
-o testclock clock does, so that a test of "ttl - 1 ms: alive, 1 ms more:
gone" is exact whatever the real time does.  Every deadline is on it: a lease's (now + ttl), a tombstone's (now +
tombstone_ttl_ms), a drain's (now + drain_window_ms).  A node whose
deadline is <= now is gone for every function, reaped or not, as in the
embedded store.  Node times are TIME itself (wall time), as the embedded
store stamps them with CLOCK_REALTIME.  A mount estimates now_ms from the
now_ms of every reply (it never goes backwards) and hides what is past
its deadline by that estimate.

The tenant layout
-----------------
A store made by a mount with -o store_layout=tenant (meta layout tenant,
recorded by sfs_init; every later mount follows what the store
records) keeps every fact a tenant transition needs in the tenant's own
slot, so that each call names the keys of one Redis Cluster slot: a
tenant function takes P:{P.tTID}:meta as KEYS[1], its tenant's key as
KEYS[2] and nothing of {P}; it runs the same code as on P:{P}:meta
(begin, limits, gauges, counters, the inode allocator, drains), whose
root is then the tenant's {P.tTID} (its tombstone queue, its root-scope
op records).  What that changes:
  - inode numbers: tenant TID's are TID * 10^10 + n (n = 1 the tenant,
    2..9 its special files, from 10 its nodes: the tenant meta's ino),
    TID at most 900000 (mkdir of the next: ENOSPC), so every number is
    below 2^53 (16 digits);
  - no order of all tenants: no gseq anywhere; the root's .events
    interleaves the tenants with their own numbers, the root .snapshot's
    seq row says -;
  - a store-wide ceiling (max_parents max_children max_bytes
    max_tombstones) bounds each tenant as if it were the store alone;
    max_tenants stays exact (the root slot);
  - the root .stats is the mount's sum of each tenant's sfs_stats and the
    root's (instance, state, tenants, the root's own refusals);
  - a tenant is made in two calls (sfs_mkdir_tenant on the root slot
    lists it, sfs_tenant_make makes its meta, hash and first entry) and
    removed in two (sfs_rmdir_tenant on its slot, sfs_tenant_unlist on
    the root's), both rolling forward; the store's drain and test clock
    are recorded on the root, then fanned out to each tenant by the
    mount that asked (sfs_drain_store, sfs_clock_set);
  - link and rename across tenants go to one tenant's slot with the
    other's TID as their last argument (EXDEV), the other side's ESTALE
    being the mount's mirror's;
  - a call whose tenant meta is missing is ESTALE [nometa]: the tenant
    is not there, or the store lost its data, which the mount tells by
    the root meta's instance (then as ESTALEINST).

Calling convention
------------------
  FCALL sfs_<op> NUMKEYS KEY... INSTANCE OPID DEADLINE_MS ARG...

KEYS[1] is P:{P}:meta (in the tenant layout, a tenant function's is
P:{P.tTID}:meta, above, and it takes no KEYS[3]).  KEYS[2], when the function is about a
tenant, is that tenant's P:{P.tTID}:t (the mount knows TID from its
mirror; a TID that is gone, or was never, is a dead tenant: ESTALE).  A
function about two tenants (link, rename) takes the second as KEYS[3].
Functions whose scope is the store or one tenant (drain, drain_now,
expire, stats, dump) take 1 key for the store, 2 for a tenant.  Other
keys of a tenant are derived from its key; root-level functions
(mkdir_tenant, rmdir_tenant, drain of the store, expire's tombstone
ageing) also touch tenant keys they find in P:{P}:tenants or tombq, which
works on one Redis, not across Redis Cluster slots: the tenant layout
(above) makes each of them one call per slot.

  INSTANCE     the store instance the mount believes in (meta instance).
               A different one, or none (the store was flushed), is
               outcome ESTALEINST: the mount reloads everything.
  OPID         "" or an id unique per mutation, "MOUNT:N": the mount's id
               (no ':') and a counter.  Every entry the call appends
               names MOUNT (field by), so a mount tells its own changes
               from the others'.  The
               first run records its outcome under op:OPID for
               OP_KEEP_MS; a run that finds the record returns it and
               does nothing else, so a retry after a lost reply applies
               the operation at most once.  Read-only functions ignore it.
  DEADLINE_MS  "" or "0" (none), or the server's real time (TIME, in ms
               since the epoch, whatever the store's clock: under
               testclock too) after which the mutation must not happen:
               the mount's lower bound of TIME now, plus store_timeout.
               Past it: ETIMEDOUT [real ms], nothing done, nothing
               recorded (no later run of the same operation can be
               earlier, unless TIME steps back: the fence below is what
               does not depend on clocks).

  sfs_fence NUMKEYS KEY... INSTANCE OPID
      The end of a mutation whose reply the mount did not get in time
      (the same keys as the call: its op record lives where the call's
      does).  When op:OPID holds the call's outcome, returns it: the
      call ran, and this is what it did.  Else records ETIMEDOUT [real
      ms] as the outcome of OPID and returns it: the call has not run,
      and now never will (a run that finds the record returns it and
      does nothing else).  Either way the mount reports the truth.  An
      instance that changed is ESTALEINST (the call, if it runs, meets
      the same).  Writes nothing else; not logged.

Then the function's arguments.  Modes are decimal (420 = 0644).  A
credential is three arguments UID GID GROUPS (GROUPS: supplementary gids
separated by commas, may be empty); UID "" means no credential (the
embedded store's NULL cred: no check).  An owner is UID GID MODE (the
mode with the umask applied; only its low 12 bits are kept).  Booleans
are "1" or anything else.

Outcomes
--------
An array: { CODE, now_ms, seq, results... }.  CODE is "OK" or an errno
name: ENOENT EEXIST ESTALE EAGAIN ENOSPC EDQUOT EFBIG EINVAL ENAMETOOLONG
EROFS EXDEV EACCES EISDIR EPERM, plus ETIMEDOUT (deadline passed),
EDAMAGED (results: KEY, a key of the store that is not as statefs made
it; nothing was written, not even a counter: "Damage" in base.lua),
ESTALEINST (instance mismatch; results: the store's instance or ""),
ELIMITS and ELIBVERSION (sfs_init).  now_ms is the store's clock at the
call.  seq is the tenant log's seq after the call (the root log's for a
root-level function): the mount waits until its mirror has applied it
before it answers the syscall (read-your-writes), refusals included, so
an EEXIST is never followed by an ENOENT from a stale mirror.  A
refusal that the embedded store counts (its refuse(): ENOSPC EDQUOT EFBIG
EROFS EEXIST ESTALE EAGAIN ENOENT, on the paths where the embedded store
counts them) bumps the matching refused_* counter; the others (EINVAL
EXDEV EACCES EISDIR, a cleanup of an unknown tenant, a setattr or
child_ttl through a dead node, a drain of a dead tenant) do not, as in
the embedded store.

An OK of a call whose operation id names a mount (MOUNT:N) that
appended to its tenant's log ends with one more element, after the
results: { "sfs.entries", ID, FIELDS, ... }, each entry the call
appended there, in order: its stream ID and its FIELD VALUE list as the
log holds it (numbers may come as integers).  The mount applies them
itself when they are the next (redis/own.c) and strips them before
reading the results.  The outcome recorded for a retry has none.

After its writes a call publishes, on each log it appended to, its
shard channel (the log's key with :news for :log), "SEQ BY [GSEQ]": the
last seq appended there, the mount whose call it was ("" for none) and,
where the store has one order of all tenants, the first number of that
order the call's entries there took.  When those entries are small
(their values 1024 bytes at most) and the channel's last message
reached more than one subscriber, a newline and the entries follow:
for each, its stream ID, a newline, its count of names and values, a
newline, then each name and value as LEN:BYTES, as the log holds them.

Log entries
-----------
XADD P:{P.tTID}:log MAXLEN ~ lim_log_max * FIELD VALUE..., in the order
the changes happened; a function appends one entry per change (a create
that reaps an expired child at its name appends the expire, then the
create).  Every entry has:

  seq     its first sequence number in the tenant (1, 2, ...; never reused)
  gseq    its first number in the store-wide order of all tenants: every
          entry of a call, tenant logs and root log alike, takes the
          next of meta gseq, as many as its seq numbers (seq .. seq+nseq-1
          are gseq .. gseq+nseq-1), in the order the call appends them,
          all with one change of meta per call.  Absent (STORE_ORDER
          false: a Redis Cluster mode, where calls of different tenants
          live in different slots; entries a library before version 6
          wrote): no root order, and a mount numbers the root's lines per
          tenant.  A mount applies one read of every log merged by it,
          numbers the root's .events lines by it, ends the root's
          .snapshot at one of its numbers, and serves a root seek from
          the logs merged by it.
  nseq    present when the entry stands for more than one .events line:
          its lines are numbered seq .. seq+nseq-1, in the order given
          below.  An entry with no .events line still takes one seq (a
          .events reader sees the gap).
  op      what changed (below)
  ms      the store's clock when it changed
  by      the mount whose call made the change (OPID's MOUNT); "" for
          a call with no OPID (a reaper's sfs_expire).
  ns      wall time in ns: the atime/mtime/ctime stamped on every node
          the change makes or touches (a join stamps the new parent and
          the tenant's mtime/ctime; a create, link or unlink the
          parent's mtime/ctime; a rename both parents'; a removal the
          states that lose a link but live on, ctime).

and, per op (.events line: SEQ OP TENANT PARENT CHILD GENERATION VERSION,
"-" for a field that does not apply):

  join  kind=tenant name tid ino uid gid mode
        A tenant is made (the first entry of its log).  Line: join T - - - -.
  join  kind=parent name ino gen uid gid mode
        Parent NAME joins with inode INO, generation GEN; a tombstone of
        NAME, if the tenant has one, is removed.  Line: join T NAME - GEN -.
  leave name gen tomb ino
        Parent NAME (inode INO) leaves: every link of its bucket goes (a
        state whose last link it was ends), the parent goes, and a
        tombstone NAME with generation GEN and deadline TOMB is filed.
        Line: leave T NAME - GEN -.
  depart name gen tomb [ino] [refresh=1]
        As leave when INO is given (a live parent); without INO only the
        tombstone is filed (GEN 0: the name never joined).  With
        refresh=1 the tombstone NAME exists and only its deadline becomes
        TOMB.  Line: depart T NAME - GEN -.
  expire kind=parent name ino gen tomb
        Parent NAME passed its deadline: as leave.  Line: expire T NAME - GEN -.
  expire kind=child ino ver lines
        State INO passed its deadline: every link goes, the state ends.
        LINES lists its links "PARENT/CHILD", newest first; one line each:
        expire T PARENT CHILD GEN(PARENT) VER.
  create parent pino child ino gen uid gid mode ttl deadline
        State INO (version 0, empty, nlink 1, lease TTL/DEADLINE, 0 for
        none) is linked as CHILD in parent PINO.  Line: create T PARENT CHILD GEN 0.
  unlink parent pino child ino gen ver
        The link CHILD of PINO goes; state INO ends when it was its last.
        Line: unlink T PARENT CHILD GEN VER.
  link  parent pino child ino gen ver
        State INO gains the link CHILD in PINO (nlink + 1; the state's
        ctime).  Line: link T PARENT CHILD GEN VER FP FC, FP/FC the
        state's newest link before this one (the mirror names it).
  rename parent pino child to_parent to_pino to_child ino gen ver
         [replaced=INO2 replaced_ver=VER2]
        The link CHILD of PINO, to state INO, moves to TO_CHILD in
        TO_PINO (GEN is TO_PARENT's; INO's ctime).  With replaced,
        TO_CHILD held state INO2, which loses that link (and ends when
        it was its last): two lines, unlink T TO_PARENT TO_CHILD GEN
        VER2, then the rename line.
        Line: rename T TO_PARENT TO_CHILD GEN VER PARENT CHILD.
  exchange parent pino child to_parent to_pino to_child ino ino2 gen ver
        The two entries trade states: INO, at CHILD, goes to TO_CHILD;
        INO2, at TO_CHILD, to CHILD (no ctime; both parents' mtime and
        ctime).  VER is INO's.
        Line: exchange T TO_PARENT TO_CHILD GEN VER PARENT CHILD.
  write ino ver data lines [mtime] [kind=child mode uid gid atime mtime
        ctime deadline]
        State INO's content becomes DATA (whole), version VER, mtime and
        ctime NS (mtime MTIME when given: an mtime kept by sfs_publish).
        LINES: its links "PARENT/CHILD", newest first, one line each:
        write T PARENT CHILD GEN(PARENT) VER.  From sfs_setattr (a size
        change) it also carries what that call set, as attr does.
  attr  kind ino [mode] [uid] [gid] [atime] [mtime] [ctime] [deadline]
        Node INO of KIND (tenant, parent, child) takes the attributes
        given; DEADLINE: its lease was renewed (a touch).  No line.
  ttl   kind ino ttl deadline
        Node INO's lease becomes TTL, its deadline DEADLINE (0, 0: none).  No line.
  renew kind ino ttl deadline
        Node INO's deadline becomes DEADLINE.  No line.
  child_ttl ino ttl
        Parent INO's children start with lease TTL (0: default_ttl).  No line.
  tomb_age name
        Tombstone NAME aged out.  No line.
  drain deadline
        The tenant's drain starts, ending at DEADLINE.  Line: drain T - - - -.
  drain clear=1 parents [dead=1]
        The tenant's drain scope is cleared: every parent in PARENTS
        (names in join order) leaves as by leave but files no tombstone,
        every tombstone goes, the tenant is drained.  One line per
        parent: drain T PARENT - GEN -; with dead=1 (a drain of the whole
        store) the tenant goes too, and one more line: cleanup T - - - -
        (drain T - - - - is only ever a tenant's drain starting).
  cleanup name tid
        The tenant and everything in it go.  Line: cleanup T - - - -.

The root log's entries (seq is the root seq; no .events line but drain):

  tenant  name tid ino       a tenant was made: follow its log
  cleanup name tid           a tenant was cleaned up
  drain   deadline           the store's drain starts.  Line: drain - - - - -
  drained tenants            the store's drain cleared it: every tenant
                             went (their logs say how), state drained
  clock   clock_ms           testclock: the store's clock moved to CLOCK_MS

A mount follows the root log and each tenant's log with XREAD; one whose
position fell off a log (trimmed) reloads from sfs_dump.

Functions
---------
Mutations (each mirrors the named function of the embedded store,
checks in this order; "(counted)" marks refusals that bump refused_*):

  sfs_init 1 META - - - LIBVERSION CANDIDATE ADOPT [NAME VALUE]...
      First mount (meta has no instance): records instance CANDIDATE (16
      hex digits), LIBVERSION of the library, the limits given (a limit
      not given takes its default) and zero gauges.  Later mounts:
      ELIBVERSION [library version] when the mount is older than the
      library; unless ADOPT is "1", each limit given (or its default)
      must equal the recorded one, in LIMITS order, else ELIMITS [name,
      recorded, given]; EINVAL [name] for an unknown limit or a bad
      value.  A pair "layout root|tenant" among them is the layout a
      store made now takes (default root).  OK [instance, created 1|0,
      then NAME VALUE of every recorded limit, then layout root|tenant].
      Ignores INSTANCE and OPID.
  sfs_mkdir_tenant 1 META ... NAME UID GID MODE     (tenant_create)
      name rule (EINVAL, ENAMETOOLONG); draining EROFS (counted); exists
      EEXIST (counted); max_tenants ENOSPC (counted).  OK [tid, ino, root seq].
      The tenant layout: a TID past 900000 ENOSPC (counted); the
      tenant is listed and the root log's tenant entry carries name tid
      ino uid gid mode; OK [tid, ino, root seq, created_ms]; then:
  sfs_tenant_make 2 TMETA T ... NAME TID UID GID MODE CLOCK_MS CREATED_MS [LIMIT VALUE]...
      (the tenant layout) the tenant's meta (the limits given, the
      instance INSTANCE), hash and log's join kind=tenant entry.  Made
      already: OK, nothing written; a meta of another instance
      ESTALEINST.  OK [ino].
  sfs_tenant_unlist 1 META ... NAME TID [COUNTS...]
      (the tenant layout) NAME leaves the list when it maps to TID, with
      the root log's cleanup, and COUNTS (the tenant's counters as its
      gone meta keeps them, admissions removals expiries joins leaves
      and the eight refused_*, in that order; missing ones 0, one not a
      number EINVAL) are added to the root's; a store's drain with no
      tenant left is drained.  OK.
  sfs_rmdir_tenant 1 META ... NAME CRED             (tenant_cleanup)
      unknown ENOENT; the cascade rule of store_rmdir for CRED EACCES.
      OK [root seq].  The tenant layout: 2 TMETA T, a tenant gone or not
      named NAME ENOENT; OK (seq the tenant's), the name left listed for
      sfs_tenant_unlist.
  sfs_join 2 META T ... NAME UID GID MODE           (parent_join)
      name rule; dead tenant ESTALE (counted); an expired parent NAME is
      reaped; draining EROFS, live NAME EEXIST, max_parents ENOSPC, the
      tenant's share tenant_max_parents EDQUOT (all counted).  The generation is the tombstone's + 1 (a due tombstone
      ages out first) or 1; a setgid tenant gives its gid and the setgid
      bit.  OK [ino, gen].
  sfs_leave 2 META T ... NAME CRED                  (parent_leave, rmdir)
  sfs_depart 2 META T ... NAME CRED                 (parent_leave, .depart)
      depart only: name rule.  Dead tenant ESTALE (counted); an expired
      parent NAME is reaped, a due tombstone NAME ages out; leave: no
      parent ENOENT (counted); depart: no parent but a tombstone: the
      tombstone's age starts over, OK.  A full pool (max_tombstones,
      ENOSPC) or tenant's share of it (tenant_max_tombstones, EDQUOT):
      due tombstones age out store-wide, once; still full, that errno
      (counted).  CRED may not empty the parent by hand EACCES.  OK [gen].
  sfs_create 2 META T ... PINO NAME UID GID MODE EXCL   (do_create)
      name rule.  Unless the parent is gone, an expired child NAME is
      reaped; a live child NAME: EEXIST (counted) with EXCL, else OK
      [its ino, 0] and nothing changes.  Admission: draining EROFS, gone
      parent ESTALE, max_children ENOSPC, parent_quota or tenant_quota
      EDQUOT, tenant_max_children EDQUOT (all counted).  Lease: the parent's child_ttl, else
      default_ttl.  A setgid parent gives its gid.  OK [ino, 1].
  sfs_unlink 2 META T ... PINO NAME                 (do_unlink)
      gone parent ESTALE, no live child NAME ENOENT (both counted; an
      expired one is reaped).  OK.
  sfs_link 3 META T CT ... SINO PINO NAME           (do_link)
      T is PINO's tenant, CT the state's.  Name rule; gone state or
      parent ESTALE (counted); CT is not T EXDEV; an expired child NAME
      is reaped; live NAME EEXIST; admission (draining EROFS, ESTALE,
      quotas EDQUOT; no max_children); the state gone by now ESTALE (all
      counted).  OK.
  sfs_rename 3 META T BT ... PINO NAME TO_PINO TO_NAME FLAGS   (do_rename)
      FLAGS: 1 noreplace, 2 exchange.  Name rule for TO_NAME; gone
      parent ESTALE (counted); BT is not T EXDEV; both flags EINVAL;
      expired children at either name are reaped; no source ENOENT,
      exchange without a destination ENOENT, noreplace with one EEXIST
      (counted); a destination that is a link to the source's state: OK,
      nothing happens (not under exchange); draining EROFS (counted); a
      move to another parent over its parent_quota EDQUOT (counted).  OK.
  sfs_publish 2 META T ... SINO MODE BASE DATA [SEEN_VERSION SEEN_MTIME]
                                                     (do_stage_publish)
      MODE replace|append|cas; BASE the version a cas stage opened on;
      SEEN_*: the state's version and mtime when the stage last wrote.
      Gone state ESTALE, cas with another version EAGAIN, over
      max_payload EFBIG, growth over max_bytes ENOSPC, over the
      tenant's share tenant_max_bytes EDQUOT (all counted).  The
      state's mtime survives when it changed since SEEN_MTIME with the
      version still SEEN_VERSION (set before close: cp -p).  OK [version].
  sfs_setattr 2 META T ... KIND INO MODE UID GID ATIME MTIME SIZE [KILL RENEW]
                                                     (do_setattr)
      Each of MODE..KILL "" when not set.  KILL: 1 clears set-user-ID, 2
      set-group-ID, from the mode as it is (after MODE); RENEW "1": the
      lease of a parent or child is renewed too (touch).  Gone node
      ESTALE, SIZE of a directory EISDIR (neither counted); RENEW of a
      node with a lease while draining EROFS; SIZE over max_payload
      EFBIG, growth over max_bytes ENOSPC, over tenant_max_bytes EDQUOT
      (counted).  A size change is a publication (truncate or
      zero-extend, version + 1).  OK.
  sfs_set_ttl 2 META T ... KIND INO TTL             (do_lease, set)
  sfs_renew 2 META T ... KIND INO                   (do_lease, renew)
      KIND parent|child.  TTL over 10^12 ms EINVAL; gone ESTALE
      (counted); renew of a node without a lease: OK, nothing changes;
      draining EROFS (counted), a ttl of 0 included.  OK [deadline].
  sfs_set_child_ttl 2 META T ... PINO TTL           (store_set_child_ttl)
      TTL over 10^12 ms EINVAL; gone parent ESTALE (not counted; no
      drain check).  OK.
  sfs_expire 1|2 META [T] ... BUDGET                (store_expire)
      Due leases of T, oldest first, at most BUDGET (a child as by unlink,
      a parent as by rmdir with its tombstone even over max_tombstones;
      the states it ends are removals); then due tombstones store-wide,
      at most BUDGET; then, with T, a due drain of T, without T, a due
      drain of the store (due: the deadline passed or no child is left),
      so a mount that calls each tenant's then the store's ends due
      leases before a drain of the store clears the rest.  Idempotent.
      OK [leases expired, tombstones aged].
  sfs_drain 1|2 META [T] ... [CRED]                 (store_drain_as)
  sfs_drain_now 1|2 META [T] ...                    (store_drain_now)
      Dead tenant ESTALE (not counted).  A tenant's drain with CRED
      starts only when CRED could empty the tenant by hand (the rule of
      sfs_rmdir_tenant), else EACCES (not counted); a running one is not
      judged again.  Starts the drain unless one
      runs (a second call does not move its deadline).  sfs_drain clears
      the scope at once when it is due already; sfs_drain_now expires
      due leases first, then clears the scope now.  OK [state].
  sfs_clock_advance 1 META ... MS
      testclock only (else EPERM): the clock moves MS forward (MS over
      10^12, or a clock past 8 * 10^12, EINVAL).  OK
      [clock_ms].  The mount then runs sfs_expire where things are due.

Read-only (flag no-writes, FCALL_RO; INSTANCE checked, OPID and
DEADLINE_MS ignored):

  sfs_version 0                 LIBVERSION (an integer, not an outcome)
  sfs_dump 1 META ...           OK now seq LASTID META(k v...) TENANTS(name tid...)
  sfs_dump 2 META T ...         OK now seq LASTID T(k v...)
                                PARENTS({pino, P(k v...), BUCKET(name sino...)}...)
                                STATES({sino, S(k v...)}...) TOMBS(name "GEN DEADLINE"...)
                                [GSEQ: meta gseq at that instant]
      One consistent instant of the store's root or of one tenant, with
      its log's seq and last entry id: where a mount starts following.
      A dead tenant: ESTALE.
  sfs_stats 1|2 META [T] ...    OK now seq then KEY VALUE: instance state
                                drain_ms_left uptime_ms [tenant] tenants
                                parents children links tombstones bytes,
                                every limit, the counters (store-wide).
      The gauges are the store's or the tenant's; state is the scope's
      (the further of the tenant's drain and the store's).  Tombstones
      past their deadline count until sfs_expire ages them out.
  sfs_drain_store 2 TMETA T ... STATE DEADLINE NOW
      (the tenant layout) the store's drain (STATE draining|drained,
      DEADLINE) made the tenant's when it is ready; with NOW 1, or STATE
      drained, the tenant is cleared at once, else when due (its
      children gone, or DEADLINE).  OK [dead 1|0, name].  sfs_expire of a
      tenant meta gives the same [dead, name] after its two results.
  sfs_clock_set 2 TMETA T ... CLOCK_MS
      (the tenant layout, testclock) the tenant's clock becomes the
      larger of its own and CLOCK_MS.  OK.
  sfs_sync N META T... ...      OK now ROOTSEQ TSEQ... (-1: tenant gone):
                                what a mount's mirror must have applied
                                to be as fresh as the store (fsync of a
                                directory).

Rules that change with the embedded store
-----------------------------------------
Kept in one place each, so that they follow the embedded store easily:
name_check() (which names are valid at which depth), LIMITS (every limit,
its default and the order mounts compare them in), REFUSED (which errno
counts as which refusal), all three in base.lua; admit() (the admission
checks: per-tenant shares of a ceiling belong there), in child.lua; the
entry fields named above (what .events shows).

Files
-----
The library is one text, as FUNCTION LOAD takes it: the files of
redis/lua/ one after the other, in the order the Makefile lists them
(LUA_SRC), made build/gen/statefs.lua and carried into the program as
redis/statefs_lua.h.  A Lua local is seen only after it, so each file
uses only what the files before it define:

  contract.lua   this essay (the #!lua line first) and LIBVERSION
  base.lua       numbers, the rules above, arguments, damage, records
  call.lua       key names, begin() and finish(), outcomes, sfs_fence,
                 logs, gauges, and TX: the start and end of the
                 straight-line transitions (create, unlink, publish,
                 a plain rename), which use no records
  tomb.lua       tombstones                      (store/tomb.c)
  bucket.lua     a bucket's links, a state's end (store/bucket.c)
  parent.lua     sfs_join, sfs_leave, sfs_depart (store/parent.c)
  tenant.lua     sfs_mkdir_tenant, sfs_rmdir_tenant (store/tenant.c)
  child.lua      sfs_create, sfs_unlink, sfs_link, sfs_rename
                                                 (store/child.c)
  content.lua    sfs_publish                     (store/content.c)
  setattr.lua    sfs_setattr                     (store/node.c)
  lease.lua      sfs_set_ttl, sfs_renew, sfs_set_child_ttl
                                                 (store/lease.c)
  drain.lua      sfs_drain, sfs_drain_now        (store/drain.c)
  reaper.lua     sfs_expire                      (store/reaper.c)
  store.lua      sfs_version, sfs_init, sfs_clock_advance, sfs_stats
                                                 (store/store.c)
  dump.lua       sfs_dump, sfs_sync              (what a mirror loads)
  register.lua   every function registered
  lock.lua       sfs_lock, sfs_lock_drop, sfs_lock_test, sfs_lock_peek,
                 sfs_lock_renew: advisory locks every mount honours
                 (its own essay; it registers them itself, with reg())
]==]

local LIBVERSION = 9
