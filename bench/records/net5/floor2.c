/* The CPU floor of an exchange over the test hosts' shaped link: a compute loop's
 * time alone and while blocking-socket threads send and receive FLOOR_BYTES (default
 * 1 MiB) each way (threads sleep in the kernel: only the kernel's own TCP/bridge/tbf
 * work is left). ../tnbc-hosts/floor.c with the size, the work (WORK_MS, default 11)
 * and the rounds (ROUNDS, default 15, at most 99) from the environment. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static size_t N = 1 << 20; /* FLOOR_BYTES */
static int fd; static char *sbuf, *rbuf;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static void *tx(void *a){(void)a; size_t o=0; while(o<N){ssize_t n=send(fd,sbuf+o,N-o,0); if(n<=0){perror("send");exit(1);} o+=n;} return NULL;}
static void *rx(void *a){(void)a; size_t o=0; while(o<N){ssize_t n=recv(fd,rbuf+o,N-o,0); if(n<=0){perror("recv");exit(1);} o+=n;} return NULL;}
static double sink;
static void work(long it){double x=1; for(long i=0;i<it;i++) x=x*1.0000001+1e-9; sink+=x;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int server=!strcmp(argv[1],"server"); const char*peer=argv[2]; int port=5999;
  if(getenv("FLOOR_BYTES")){N=(size_t)atol(getenv("FLOOR_BYTES"));} sbuf=malloc(N); rbuf=malloc(N); memset(sbuf,1,N); memset(rbuf,2,N);
  struct sockaddr_in sa={.sin_family=AF_INET,.sin_port=htons(port)};
  if(server){int l=socket(AF_INET,SOCK_STREAM,0),one=1; setsockopt(l,SOL_SOCKET,SO_REUSEADDR,&one,sizeof one); sa.sin_addr.s_addr=INADDR_ANY; bind(l,(void*)&sa,sizeof sa); listen(l,1); fd=accept(l,NULL,NULL);}
  else {inet_pton(AF_INET,peer,&sa.sin_addr); fd=socket(AF_INET,SOCK_STREAM,0); while(connect(fd,(void*)&sa,sizeof sa)){usleep(10000); close(fd); fd=socket(AF_INET,SOCK_STREAM,0);} }
  int one=1; setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,sizeof one); if(getenv("LOWAT")){int lw=atoi(getenv("LOWAT")); setsockopt(fd,SOL_SOCKET,SO_RCVLOWAT,&lw,sizeof lw);}
  /* calibrate ~11 ms of work */
  double t0=now(); work(1000000); double wsec=getenv("WORK_MS")?atof(getenv("WORK_MS"))*1e-3:0.011; long it=(long)(wsec/((now()-t0)/1e6));
  if(server) send(fd,&it,sizeof it,0); else recv(fd,&it,sizeof it,MSG_WAITALL);
  int R=getenv("ROUNDS")?atoi(getenv("ROUNDS")):15; double alone[99],with[99],xfer[99];
  for(int r=0;r<R;r++){
    char b=0; send(fd,&b,1,0); recv(fd,&b,1,MSG_WAITALL);
    t0=now(); work(it); alone[r]=now()-t0;
    send(fd,&b,1,0); recv(fd,&b,1,MSG_WAITALL);
    pthread_t a,c; double s=now(); pthread_create(&a,NULL,tx,NULL); pthread_create(&c,NULL,rx,NULL);
    t0=now(); work(it); with[r]=now()-t0;
    pthread_join(a,NULL); pthread_join(c,NULL); xfer[r]=now()-s;
  }
  qsort(alone,R,8,cmp); qsort(with,R,8,cmp); qsort(xfer,R,8,cmp);
  printf("%s: %zu B: work alone %.3f ms, work during the exchange %.3f ms (+%.3f ms), exchange done after %.3f ms (medians of %d)\n",
         server?"server":"client",N,1e3*alone[R/2],1e3*with[R/2],1e3*(with[R/2]-alone[R/2]),1e3*xfer[R/2],R);
  return 0;
}
